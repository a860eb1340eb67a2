//! The statement that writes click events: `INSERT INTO click_events … VALUES` of a few fixed
//! numbers of rows, whose SQL depends only on that number, so diesel prepares each once per
//! connection and keeps it. A statement sized to each flush was parsed anew every time (a
//! thousand rows have ten thousand parameters): 5 % of the server's CPU under a load of clicks.
//! diesel's own batch insert caches only arrays of `'static` rows, and these borrow the batch's
//! text.

use diesel::QueryResult;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{BigInt, Nullable, Text};

use super::{Backend, INSERT_EVENTS};
use crate::rows::EventRow;

/// Some event rows, written by one statement.
pub(crate) struct InsertEvents<'a>(pub(crate) &'a [EventRow<'a>]);

impl InsertEvents<'_> {
    /// Rows per statement, largest first; a batch is split greedily into these
    /// ([`crate::rows::fixed_size_runs`]).
    pub(crate) const SIZES: [usize; 4] = [128, 16, 4, 1];
}

impl QueryId for InsertEvents<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl QueryFragment<Backend> for InsertEvents<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Backend>) -> QueryResult<()> {
        out.push_sql(INSERT_EVENTS);
        out.push_sql(
            " click_events (link_seq, occurred_at, country, city, device, browser, os, referrer, \
             referrer_url, visitor) VALUES ",
        );
        for (i, row) in self.0.iter().enumerate() {
            out.push_sql(if i == 0 { "(" } else { ", (" });
            out.push_bind_param::<BigInt, _>(&row.link_seq)?;
            out.push_sql(", ");
            out.push_bind_param::<BigInt, _>(&row.occurred_at)?;
            for text in [&row.country, &row.city] {
                out.push_sql(", ");
                out.push_bind_param::<Nullable<Text>, _>(text)?;
            }
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&row.device)?;
            for text in [&row.browser, &row.os] {
                out.push_sql(", ");
                out.push_bind_param::<Nullable<Text>, _>(text)?;
            }
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&row.referrer)?;
            out.push_sql(", ");
            out.push_bind_param::<Nullable<Text>, _>(&row.referrer_url)?;
            out.push_sql(", ");
            out.push_bind_param::<BigInt, _>(&row.visitor)?;
            out.push_sql(")");
        }
        Ok(())
    }
}

impl<C> diesel::query_dsl::RunQueryDsl<C> for InsertEvents<'_> {}
