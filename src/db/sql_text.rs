//! SQL text for the statements whose shape follows the batch: an `IN (...)`
//! of n ids, a multi-row `VALUES` of n rows.
//!
//! Why not placeholders: a prepared statement of n placeholders is a
//! statement of its own for every n. The consumer's batches come in every
//! size, so mysql_async prepared one per transaction (a round trip, the
//! server's parse and one column definition packet per column), cached it,
//! and evicted the fixed statements of the hot path (the SKU row's lock and
//! take) to make room. A profile of `stockd --role all` under load put 12 %
//! of its CPU there (docs/benchmarks-history.md, "CPU efficiency"). Sent as text, such a
//! statement is one round trip and the fixed statements stay prepared.
//!
//! Safety comes from the types, not from escaping: only integers, request
//! ids (whose parser admits `[A-Za-z0-9_.:-]` and nothing else, at the API
//! and when a broker message is decoded), the program's own constants and
//! hex literals of any bytes (`X'…'`, an event's JSON) are rendered, so no
//! value can hold a quote or a backslash, whatever the server's `sql_mode`.

use std::fmt::Write;

use crate::domain::RequestId;

/// Appends the pieces of one statement.
pub struct SqlText(String);

impl SqlText {
    pub fn new(head: &str) -> Self {
        Self(head.to_string())
    }

    pub fn raw(&mut self, sql: &str) -> &mut Self {
        self.0.push_str(sql);
        self
    }

    pub fn int(&mut self, value: impl Into<i128>) -> &mut Self {
        let _ = write!(self.0, "{}", value.into());
        self
    }

    pub fn request_id(&mut self, id: &RequestId) -> &mut Self {
        self.quoted(id.as_str())
    }

    /// `'a','b',...`: the body of an `IN (...)` of request ids.
    pub fn request_ids<'a>(&mut self, ids: impl IntoIterator<Item = &'a RequestId>) -> &mut Self {
        self.list(ids, ",", |s, id| {
            s.request_id(id);
        })
    }

    /// One of the program's own words (a status, a reason code).
    pub fn constant(&mut self, word: &'static str) -> &mut Self {
        debug_assert!(word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        self.quoted(word)
    }

    pub fn null(&mut self) -> &mut Self {
        self.raw("NULL")
    }

    /// Any bytes as a hex literal (`X'7b22...'`): text stockd did not choose
    /// (an event's JSON, a subject) travels without a quote or a backslash
    /// to escape, whatever the server's `sql_mode`.
    pub fn hex(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.push_str("X'");
        for b in bytes {
            let _ = write!(self.0, "{b:02x}");
        }
        self.0.push('\'');
        self
    }

    /// `sep` between items, `item` renders each.
    pub fn list<T>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        sep: &str,
        mut item: impl FnMut(&mut Self, T),
    ) -> &mut Self {
        for (i, value) in items.into_iter().enumerate() {
            if i > 0 {
                self.0.push_str(sep);
            }
            item(self, value);
        }
        self
    }

    fn quoted(&mut self, text: &str) -> &mut Self {
        self.0.push('\'');
        self.0.push_str(text);
        self.0.push('\'');
        self
    }

    pub fn finish(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_an_in_list_and_a_row() {
        let ids = [
            RequestId::parse("a-1").unwrap(),
            RequestId::parse("b:2").unwrap(),
        ];
        let mut sql = SqlText::new("SELECT 1 WHERE sku_id = ");
        sql.int(7u64)
            .raw(" AND id IN (")
            .request_ids(&ids)
            .raw(") AND x = (")
            .constant("RESERVED")
            .raw(",")
            .null()
            .raw(",")
            .int(-3i64)
            .raw(")");
        assert_eq!(
            sql.finish(),
            "SELECT 1 WHERE sku_id = 7 AND id IN ('a-1','b:2') AND x = ('RESERVED',NULL,-3)"
        );
    }

    #[test]
    fn any_bytes_travel_as_a_hex_literal_without_a_quote() {
        let mut sql = SqlText::new("VALUES (");
        sql.hex(b"it's \\ \"x\"").raw(",").hex(b"").raw(")");
        let text = sql.finish();
        assert_eq!(text, "VALUES (X'69742773205c20227822',X'')");
        assert_eq!(
            text.matches('\'').count(),
            4,
            "only the literals' own quotes"
        );
    }
}
