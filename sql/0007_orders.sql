-- 0007_orders: orders of several SKUs, all-or-nothing (docs/architecture.md,
-- "Orders"). Each line of an order is a ledger row of its SKU whose
-- deduct_request_id is the order id, marked order_line = 1; the order row
-- holds the order's own state. The consumer writes the order row and every
-- line in one transaction: all lines RESERVED and the order RESERVED, or
-- every line REJECTED and the order REJECTED with the reason of the first
-- line that did not fit (failed_sku_id) — no partial order is ever live.
CREATE TABLE IF NOT EXISTS orders (
  order_id        VARCHAR(64) NOT NULL,
  user_id         BIGINT UNSIGNED NOT NULL,
  -- the line list as `sku:count,...`, sorted by SKU id (domain/order.rs)
  order_lines     VARCHAR(2100) NOT NULL,
  status          VARCHAR(16) NOT NULL,
  reason          VARCHAR(32) NULL,
  failed_sku_id   BIGINT UNSIGNED NULL,
  reserved_at_ms  BIGINT UNSIGNED NOT NULL,
  expires_at_ms   BIGINT UNSIGNED NOT NULL,
  extensions      SMALLINT UNSIGNED NOT NULL DEFAULT 0,
  finished_at_ms  BIGINT UNSIGNED NULL,
  created_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (order_id),
  KEY idx_orders_status_expiry (status, expires_at_ms)
) ENGINE=InnoDB;

ALTER TABLE stock_deduct_idempotent
  ADD COLUMN IF NOT EXISTS order_line TINYINT NOT NULL DEFAULT 0;
