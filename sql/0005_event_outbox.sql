-- 0005_event_outbox: the transactional outbox of the events stockd publishes
-- (docs/operations.md, "Events"). A change MySQL decides stages its events
-- here in its own transaction; every role's event relay publishes committed
-- rows to <prefix>events with confirms and stamps published_at_ms. stockd
-- never deletes a row (its runtime user has no DELETE): the table is the
-- event log, purged by an operator with the migration user (operations.md).
-- Text columns are binary: rows are written as hex literals (db/sql_text.rs).
CREATE TABLE IF NOT EXISTS event_outbox (
  seq             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  event_id        VARBINARY(400)  NOT NULL,
  type            VARBINARY(64)   NOT NULL,
  subject         VARBINARY(300)  NOT NULL,
  time_ms         BIGINT UNSIGNED NOT NULL,
  data            BLOB            NOT NULL,
  published_at_ms BIGINT UNSIGNED NULL,
  KEY ix_event_outbox_pending (published_at_ms, seq)
) ENGINE=InnoDB;

-- The optional low-stock threshold of a SKU: stockd.sku.low_stock is published
-- when available falls to or below it (NULL: no such event).
ALTER TABLE sku_stock
  ADD COLUMN IF NOT EXISTS low_stock_threshold INT UNSIGNED NULL;

-- Corrections of Redis' count to MySQL's truth (a reconciler repair, a
-- warm-up that changed what Redis held) are movements too (kinds `repair`,
-- `warmup`): MySQL's total and available do not move (delta 0); these two
-- columns keep what Redis held before and after (NULL for other kinds;
-- before is NULL when Redis held nothing).
ALTER TABLE stock_movements
  ADD COLUMN IF NOT EXISTS redis_available_before BIGINT NULL,
  ADD COLUMN IF NOT EXISTS redis_available_after  BIGINT NULL;
