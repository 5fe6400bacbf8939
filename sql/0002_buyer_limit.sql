-- 0002_buyer_limit: the consumer enforces limit_per_user in MySQL (SPEC §10.6).
--
-- Under the SKU row lock, the batch transaction sums each buyer's live units of
-- the SKU; this index makes that a range read of the buyer's rows instead of a
-- scan of every ledger row of the SKU (a hot SKU holds hundreds of thousands).
ALTER TABLE stock_deduct_idempotent
  ADD KEY IF NOT EXISTS idx_sku_user_status (sku_id, user_id, status);
