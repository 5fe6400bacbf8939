-- 0011_sale_terms: a SKU's sale terms (docs/contract.md, "Sale window").
-- The window in milliseconds since the epoch, NULL for none: a hold is
-- admitted from `sale_opens_ms` and refused from `sale_closes_ms` on.
-- `requires_pass`: a hold of the SKU must carry a verified pass.
-- Nullable or defaulted, so the previous release, which names its columns
-- in every INSERT and SELECT, reads and writes the table as before
-- (docs/operations.md, "Upgrades").
ALTER TABLE sku_stock
  ADD COLUMN IF NOT EXISTS sale_opens_ms BIGINT NULL,
  ADD COLUMN IF NOT EXISTS sale_closes_ms BIGINT NULL,
  ADD COLUMN IF NOT EXISTS requires_pass TINYINT(1) NOT NULL DEFAULT 0;
