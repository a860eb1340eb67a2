-- On SQLite, short codes have a table of their own, written in sorted batches (see the SQLite
-- migration of the same name). Here the `UNIQUE (domain, short_code)` of `links` stays: several
-- servers create links at once, and the constraint is what keeps their codes apart. The same
-- name is a view over it, so one set of queries finds a link by its code on both.
CREATE VIEW link_codes AS SELECT domain, short_code, seq AS link_seq FROM links;
