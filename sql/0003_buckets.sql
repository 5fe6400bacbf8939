-- 0003_buckets: how many stock buckets the SKU is split into in Redis
-- (redis/buckets; 1 = not split). MySQL keeps one stock row per SKU either
-- way; the number is kept here so a warm-up rebuilds the same split.
ALTER TABLE sku_stock
  ADD COLUMN IF NOT EXISTS buckets SMALLINT UNSIGNED NOT NULL DEFAULT 1;
