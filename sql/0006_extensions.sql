-- 0006_extensions: a hold while the buyer pays (docs/contract.md §5,
-- "Extending the time to pay"). POST .../extend moves a RESERVED row's
-- expires_at_ms by reservation.extend_secs under the SKU row lock, at most
-- reservation.max_extensions times; `extensions` counts the moves made, so the
-- bound holds across api nodes and restarts. The closer's expiry and the sweep
-- read expires_at_ms, so both honour the moved time.
ALTER TABLE stock_deduct_idempotent
  ADD COLUMN IF NOT EXISTS extensions SMALLINT UNSIGNED NOT NULL DEFAULT 0;
