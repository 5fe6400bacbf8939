-- 0012_sale_schedule: what the reconciler has done for a SKU's sale window
-- (docs/contract.md, "Sale window": "Scheduled warm-up" and "Events").
-- Each column holds the opening (or closing) in milliseconds since the epoch
-- it was done for, NULL for none yet: a moved window differs from it and is
-- done again, and a restart or a second reconciler finds it done. Set by a
-- conditional UPDATE in the transaction that stages the event, so only one
-- reconciler ever flips it and tells it.
-- `sale_warmed_for_ms`: the opening the scheduled warm-up loaded and checked.
-- `sale_opened_told_ms` / `sale_closed_told_ms`: the opening / closing told
-- as `stockd.sku.sale_opened` / `stockd.sku.sale_closed`.
-- Nullable, so the previous release, which names its columns in every INSERT
-- and SELECT, reads and writes the table as before (docs/operations.md,
-- "Upgrades").
ALTER TABLE sku_stock
  ADD COLUMN IF NOT EXISTS sale_warmed_for_ms BIGINT NULL,
  ADD COLUMN IF NOT EXISTS sale_opened_told_ms BIGINT NULL,
  ADD COLUMN IF NOT EXISTS sale_closed_told_ms BIGINT NULL;
