-- 0004_stock_movements: every change of a SKU's stock outside the reservation
-- lifecycle (creation, restock by PUT, adjustment), one row each, written in
-- the same transaction as the change. Sales and releases stay in the ledger
-- (stock_deduct_idempotent); the two together explain every unit:
-- total_stock = sum(delta), available_stock = sum(delta) - live ledger units.
-- `id` orders the rows and is the cursor of the movements endpoint.
CREATE TABLE IF NOT EXISTS stock_movements (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  sku_id           BIGINT UNSIGNED NOT NULL,
  kind             VARCHAR(16)     NOT NULL,
  delta            BIGINT          NOT NULL,
  total_before     BIGINT          NOT NULL,
  total_after      BIGINT          NOT NULL,
  available_before BIGINT          NOT NULL,
  available_after  BIGINT          NOT NULL,
  reason           VARCHAR(200)    NULL,
  reference        VARCHAR(200)    NULL,
  actor            VARCHAR(128)    NOT NULL,
  adjustment_id    VARCHAR(64)     NULL,
  created_at_ms    BIGINT UNSIGNED NOT NULL,
  UNIQUE KEY uq_stock_movements_adjustment (sku_id, adjustment_id),
  KEY ix_stock_movements_sku (sku_id, id)
) ENGINE=InnoDB;
