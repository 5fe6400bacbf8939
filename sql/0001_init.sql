-- 0001_init: stock per SKU and the deduction ledger (idempotency table).
--
-- Every writer of ledger rows of SKU X first locks X's sku_stock row
-- (SELECT ... FOR UPDATE), so ledger writes of one SKU are serialized and the
-- conservation `total_stock - available_stock = sum of live ledger units` holds
-- at every commit.

CREATE TABLE IF NOT EXISTS sku_stock (
  sku_id          BIGINT UNSIGNED NOT NULL,
  total_stock     BIGINT NOT NULL,
  available_stock BIGINT NOT NULL,
  limit_per_user  INT UNSIGNED NOT NULL,
  version         BIGINT UNSIGNED NOT NULL DEFAULT 0,
  created_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (sku_id),
  CONSTRAINT sku_available_not_negative CHECK (available_stock >= 0),
  CONSTRAINT sku_available_within_total CHECK (available_stock <= total_stock)
) ENGINE=InnoDB;

-- One row per (sku_id, request_id): the idempotency key of a deduction.
-- status: RESERVED | CONFIRMED | RELEASED | REJECTED (live = RESERVED + CONFIRMED).
-- reason: why a row was RELEASED (CANCELLED, EXPIRED) or REJECTED (OVER_ADMITTED,
-- UNKNOWN_SKU).
-- redis_pending: 1 while a decided transition still has to be mirrored to Redis.
CREATE TABLE IF NOT EXISTS stock_deduct_idempotent (
  sku_id            BIGINT UNSIGNED NOT NULL,
  deduct_request_id VARCHAR(64) NOT NULL,
  user_id           BIGINT UNSIGNED NOT NULL,
  deduct_count      INT UNSIGNED NOT NULL,
  status            VARCHAR(16) NOT NULL,
  reason            VARCHAR(32) NULL,
  reserved_at_ms    BIGINT UNSIGNED NOT NULL,
  expires_at_ms     BIGINT UNSIGNED NOT NULL,
  finished_at_ms    BIGINT UNSIGNED NULL,
  redis_pending     TINYINT NOT NULL DEFAULT 0,
  created_at        DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at        DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (sku_id, deduct_request_id),
  KEY idx_status_expiry (status, expires_at_ms),
  KEY idx_redis_pending (redis_pending),
  CONSTRAINT ledger_count_positive CHECK (deduct_count > 0)
) ENGINE=InnoDB;
