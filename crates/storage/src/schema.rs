//! The diesel schema, shared by both backends (see `migrations/`).

diesel::table! {
    workspaces (id) {
        id -> Text,
        name -> Text,
        rate_limit -> Integer,
        created_at -> BigInt,
    }
}

diesel::table! {
    api_keys (id) {
        id -> Text,
        workspace_id -> Text,
        name -> Text,
        prefix -> Text,
        key_hash -> Text,
        created_at -> BigInt,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    links (seq) {
        seq -> BigInt,
        id -> Text,
        workspace_id -> Text,
        domain -> Text,
        short_code -> Text,
        destination -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        /// The redirect rules as JSON (`stored_options.rs`); NULL for a plain link.
        rules -> Nullable<Text>,
        /// The tags as a JSON array; NULL for none.
        tags -> Nullable<Text>,
        archived -> Bool,
    }
}

diesel::table! {
    /// Each tag of each link: what `GET /links?tag=` searches.
    link_tags (link_seq, tag) {
        link_seq -> BigInt,
        tag -> Text,
    }
}

diesel::table! {
    link_clicks (link_seq) {
        link_seq -> BigInt,
        clicks -> BigInt,
    }
}

diesel::table! {
    /// The code index: on SQLite a table that folds receive the codes of new links
    /// (`sqlite/recent_codes.rs`), on PostgreSQL a view over `links` and its unique constraint.
    link_codes (domain, short_code) {
        domain -> Text,
        short_code -> Text,
        link_seq -> BigInt,
    }
}

diesel::table! {
    /// SQLite only, one row: every link up to `through_seq` has its code in `link_codes`.
    link_codes_folded (through_seq) {
        through_seq -> BigInt,
    }
}

diesel::table! {
    webhooks (id) {
        id -> Text,
        workspace_id -> Text,
        target_url -> Text,
        secret -> Text,
        events -> Text,
        created_at -> BigInt,
        disabled_at -> Nullable<BigInt>,
        consecutive_failures -> Integer,
    }
}

diesel::table! {
    webhook_deliveries (event_id, webhook_id) {
        event_id -> Text,
        webhook_id -> Text,
        event_type -> Text,
        payload -> Text,
        state -> Text,
        attempts -> Integer,
        next_attempt_at -> BigInt,
        locked_until -> Nullable<BigInt>,
        last_status_code -> Nullable<Integer>,
        last_error -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    webhook_attempts (event_id, webhook_id, attempt) {
        event_id -> Text,
        webhook_id -> Text,
        attempt -> Integer,
        started_at -> BigInt,
        duration_ms -> BigInt,
        status_code -> Nullable<Integer>,
        error -> Nullable<Text>,
    }
}

diesel::joinable!(api_keys -> workspaces (workspace_id));
diesel::joinable!(links -> workspaces (workspace_id));
diesel::joinable!(link_clicks -> links (link_seq));
diesel::joinable!(link_tags -> links (link_seq));
diesel::joinable!(webhooks -> workspaces (workspace_id));
diesel::joinable!(webhook_deliveries -> webhooks (webhook_id));

diesel::allow_tables_to_appear_in_same_query!(
    workspaces,
    api_keys,
    links,
    link_clicks,
    link_tags,
    link_codes,
    link_codes_folded,
    webhooks,
    webhook_deliveries,
    webhook_attempts,
    click_events,
    click_rollups,
    click_rollup_days,
    click_rollup_stale,
);

diesel::table! {
    /// Creating POSTs' answers by their `Idempotency-Key` (`queries/idempotency.rs`).
    idempotency_keys (workspace_id, idempotency_key) {
        workspace_id -> Text,
        idempotency_key -> Text,
        fingerprint -> Text,
        claim -> Text,
        status -> Nullable<Integer>,
        body -> Nullable<Text>,
        created_at -> BigInt,
    }
}

diesel::table! {
    /// One row per counted click (`queries/analytics.rs`). `id` is SQLite's row id, and a
    /// sequence on PostgreSQL (unique, not a key: the table is partitioned by time).
    click_events (id) {
        id -> BigInt,
        link_seq -> BigInt,
        occurred_at -> BigInt,
        country -> Nullable<Text>,
        city -> Nullable<Text>,
        device -> Text,
        browser -> Nullable<Text>,
        os -> Nullable<Text>,
        referrer -> Text,
        referrer_url -> Nullable<Text>,
        visitor -> BigInt,
    }
}

diesel::table! {
    /// Per workspace, UTC day and dimension value: clicks and distinct visitors
    /// (`queries/rollups.rs`). No key: a day's rows are replaced together.
    click_rollups (workspace_id, day, dimension) {
        workspace_id -> Text,
        day -> BigInt,
        dimension -> Text,
        value -> Nullable<Text>,
        clicks -> BigInt,
        visitors -> BigInt,
    }
}

diesel::table! {
    /// The UTC days rolled up.
    click_rollup_days (day) {
        day -> BigInt,
    }
}

diesel::table! {
    /// Rolled-up days whose events changed since, with a version that grows with each change.
    click_rollup_stale (day) {
        day -> BigInt,
        version -> BigInt,
    }
}

diesel::table! {
    /// One row: the secret daily visitor keys derive from.
    analytics_secret (id) {
        id -> Integer,
        secret -> Text,
    }
}

// A day's rollup groups the events by their links' workspace and one of their columns.
diesel::allow_columns_to_appear_in_same_group_by_clause!(
    links::workspace_id,
    click_events::country,
    click_events::city,
    click_events::device,
    click_events::browser,
    click_events::os,
    click_events::referrer,
);
