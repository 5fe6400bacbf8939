//! The sale terms of every SKU that has any, in memory, read without a lock
//! held across an await: the hot path takes a read lock for one map lookup.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::db::{self, Db, DbError};
use crate::domain::{SaleTerms, SkuId};

/// Every SKU's sale terms as this node last read them from MySQL. A SKU
/// absent from the map has none (sells to everyone, always).
#[derive(Debug, Default)]
pub struct SaleBoard {
    terms: RwLock<HashMap<SkuId, SaleTerms>>,
}

impl SaleBoard {
    /// The terms of `sku_id` as this node knows them (none when absent).
    pub fn terms(&self, sku_id: SkuId) -> SaleTerms {
        let map = self.terms.read().unwrap_or_else(|p| p.into_inner());
        map.get(&sku_id).copied().unwrap_or_default()
    }

    /// The SKUs of a hold that require a pass, in the order given (the SKUs
    /// a pass must admit; none: a pass given is ignored).
    pub fn needing_pass(&self, skus: &[SkuId]) -> Vec<SkuId> {
        let map = self.terms.read().unwrap_or_else(|p| p.into_inner());
        skus.iter()
            .copied()
            .filter(|s| map.get(s).is_some_and(|t| t.requires_pass))
            .collect()
    }

    /// Sets one SKU's terms (a SKU back to none leaves the map).
    pub fn set(&self, sku_id: SkuId, terms: SaleTerms) {
        let mut map = self.terms.write().unwrap_or_else(|p| p.into_inner());
        if terms.is_open_to_all() {
            map.remove(&sku_id);
        } else {
            map.insert(sku_id, terms);
        }
    }

    /// Reads every SKU's terms from MySQL and replaces the board whole.
    pub async fn reload(&self, db: &Db) -> Result<usize, DbError> {
        let all: HashMap<SkuId, SaleTerms> = db::sale::all_terms(db).await?.into_iter().collect();
        let n = all.len();
        *self.terms.write().unwrap_or_else(|p| p.into_inner()) = all;
        Ok(n)
    }

    /// Reads one SKU's terms from MySQL (a notice that they changed).
    pub async fn refresh(&self, db: &Db, sku_id: SkuId) -> Result<(), DbError> {
        let terms = db
            .bounded(async {
                let mut conn = db.conn().await?;
                db::sale::terms(&mut conn, sku_id).await
            })
            .await?;
        self.set(sku_id, terms.unwrap_or_default());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sku_without_terms_leaves_the_board() {
        let board = SaleBoard::default();
        let sku = SkuId::new(7).unwrap();
        let terms = SaleTerms {
            requires_pass: true,
            ..SaleTerms::default()
        };
        board.set(sku, terms);
        assert_eq!(board.terms(sku), terms);
        let other = SkuId::new(8).unwrap();
        assert_eq!(board.needing_pass(&[other, sku]), vec![sku]);
        board.set(sku, SaleTerms::default());
        assert!(board.terms.read().unwrap().is_empty());
    }
}
