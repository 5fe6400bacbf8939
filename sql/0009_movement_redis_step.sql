-- 0009_movement_redis_step: the Redis half of a stock movement (issue 51).
-- A movement now moves the two stores in an order chosen by its sign
-- (docs/architecture.md, "Adjustments exactly once"): a restock commits in
-- MySQL first and applies to Redis after, a cut is taken from Redis before
-- its commit. `redis_op` names the movement's Redis step (its marker
-- `<p>{sku}:op:<redis_op>`, which makes the step idempotent); `redis_pending`
-- is 1 while a committed restock has not reached Redis yet, and the
-- reconciler's sweep (src/ops/stock_step.rs) finishes it when the caller
-- went away.
-- Readable by the previous release: it names its columns, never reads these,
-- and its rows get NULL and 0, "nothing pending" (it moved Redis inside its
-- transaction), so the sweep leaves them alone.
ALTER TABLE stock_movements
  ADD COLUMN IF NOT EXISTS redis_op VARCHAR(64) NULL,
  ADD COLUMN IF NOT EXISTS redis_pending TINYINT UNSIGNED NOT NULL DEFAULT 0,
  ADD UNIQUE INDEX IF NOT EXISTS uq_stock_movements_redis_op (sku_id, redis_op),
  ADD INDEX IF NOT EXISTS ix_stock_movements_redis_pending (redis_pending, id);
