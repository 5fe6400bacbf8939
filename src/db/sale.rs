//! A SKU's sale terms in `sku_stock` (`sql/0011_sale_terms.sql`): the
//! window and `requires_pass`. Apart from the stock columns of `sku.rs`
//! because no ledger writer reads them: only the SKU admin writes them
//! (under the SKU row lock), and the api nodes' boards and the warm-up read
//! them.

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::DbError;
use crate::domain::{SaleTerms, SkuId};

type RawTerms = (Option<i64>, Option<i64>, bool);

fn from_raw(raw: RawTerms) -> SaleTerms {
    SaleTerms {
        opens_at_ms: raw.0,
        closes_at_ms: raw.1,
        requires_pass: raw.2,
    }
}

/// The SKU's terms; None for an unknown SKU.
pub async fn terms<Q: Queryable>(q: &mut Q, sku: SkuId) -> Result<Option<SaleTerms>, DbError> {
    let raw: Option<RawTerms> = q
        .exec_first(
            "SELECT sale_opens_ms, sale_closes_ms, requires_pass FROM sku_stock WHERE sku_id = ?",
            (sku.get(),),
        )
        .await?;
    Ok(raw.map(from_raw))
}

/// Sets the SKU's terms (its row locked by the caller's transaction).
pub async fn set_terms(
    tx: &mut Transaction<'_>,
    sku: SkuId,
    terms: &SaleTerms,
) -> Result<(), DbError> {
    tx.exec_drop(
        "UPDATE sku_stock SET sale_opens_ms = ?, sale_closes_ms = ?, requires_pass = ?
         WHERE sku_id = ?",
        (
            terms.opens_at_ms,
            terms.closes_at_ms,
            terms.requires_pass,
            sku.get(),
        ),
    )
    .await?;
    Ok(())
}

/// Every SKU whose terms are not the default (an api node's board: the rest
/// sell to everyone, always).
pub async fn all_terms(db: &super::Db) -> Result<Vec<(SkuId, SaleTerms)>, DbError> {
    let rows: Vec<(u64, Option<i64>, Option<i64>, bool)> = db
        .bounded(async {
            let mut conn = db.conn().await?;
            Ok(conn
                .query(
                    "SELECT sku_id, sale_opens_ms, sale_closes_ms, requires_pass FROM sku_stock
                     WHERE sale_opens_ms IS NOT NULL OR sale_closes_ms IS NOT NULL
                        OR requires_pass <> 0",
                )
                .await?)
        })
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, o, c, p)| Some((SkuId::new(id).ok()?, from_raw((o, c, p)))))
        .collect())
}
