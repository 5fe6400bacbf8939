-- 0008_told_available: what the first telling of a ledger row said (issue 49).
-- A row's `persisted` or `rejected` event (and its order's, for a line)
-- carries the SKU's available right after the row was inserted; a duplicate
-- deduction that meets the row later (a redelivery, the consumer after the
-- lifecycle applied it first) tells the event again under the same id, and
-- must tell it with the same data, not with the available of that later
-- moment. NULL for rows written before this column (or by the previous
-- release during a rolling upgrade): told again with the available of the
-- moment, as before (docs/contract.md §18).
ALTER TABLE stock_deduct_idempotent
  ADD COLUMN IF NOT EXISTS told_available BIGINT NULL;
