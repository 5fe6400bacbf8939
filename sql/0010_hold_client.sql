-- 0010_hold_client: holds belong to their client (issue 48, contract §6.2).
-- The name of the client (`auth.clients[].name`, at most 64 bytes) that made
-- a reservation or an order, when `auth.required` is true; NULL for a hold of
-- no one (made with `auth.required` false, or by a release before owners).
-- Nullable with no default but NULL, so the previous release, which names its
-- columns in every INSERT and SELECT, reads and writes these tables as before
-- (docs/operations.md, "Upgrades"). (0009 is another branch's number.)
ALTER TABLE stock_deduct_idempotent
  ADD COLUMN IF NOT EXISTS client VARCHAR(64) NULL;
ALTER TABLE orders
  ADD COLUMN IF NOT EXISTS client VARCHAR(64) NULL;
