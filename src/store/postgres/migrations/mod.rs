//! Embedded, numbered SQL migrations, applied under a Postgres advisory lock so that any number
//! of replicas (or a `ctxd migrate` Job) can start at once.
//!
//! Each migration is one transaction whose statements are sent one at a time: Citus forwards a
//! statement on a distributed table to the workers, and refuses to when it arrives inside a
//! multi-statement query (docs/scaling.md). Migration 7 distributes the tables when the citus
//! extension is installed; a test holds every later one to what a distributed schema accepts.

use tokio_postgres::Client;

use crate::store::StoreError;

/// One migration: its number and SQL.
#[derive(Debug)]
pub(super) struct Migration {
    pub(super) version: i64,
    name: &'static str,
    pub(super) sql: &'static str,
}

/// All migrations, in order. Append only: never change what one that has shipped does (its text
/// may be rewritten to do the same where Citus refuses it: migration 9, docs/scaling.md).
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "conversations",
        sql: include_str!("0001_conversations.sql"),
    },
    Migration {
        version: 2,
        name: "context",
        sql: include_str!("0002_context.sql"),
    },
    Migration {
        version: 3,
        name: "summaries_memory",
        sql: include_str!("0003_summaries_memory.sql"),
    },
    Migration {
        version: 4,
        name: "log_positions",
        sql: include_str!("0004_log_positions.sql"),
    },
    Migration {
        version: 5,
        name: "conversation_resources",
        sql: include_str!("0005_conversation_resources.sql"),
    },
    Migration {
        version: 6,
        name: "reasoning",
        sql: include_str!("0006_reasoning.sql"),
    },
    Migration {
        version: DISTRIBUTION,
        name: "distribution",
        sql: include_str!("0007_distribution.sql"),
    },
    Migration {
        version: 8,
        name: "leases",
        sql: include_str!("0008_leases.sql"),
    },
    Migration {
        version: 9,
        name: "listing filters",
        sql: include_str!("0009_listing_filters.sql"),
    },
    Migration {
        version: 10,
        name: "rewinds",
        sql: include_str!("0010_rewinds.sql"),
    },
    Migration {
        version: 11,
        name: "usage",
        sql: include_str!("0011_usage.sql"),
    },
    Migration {
        version: 12,
        name: "loaded bytes",
        sql: include_str!("0012_loaded_bytes.sql"),
    },
    Migration {
        version: 13,
        name: "incarnation",
        sql: include_str!("0013_incarnation.sql"),
    },
    Migration {
        version: 14,
        name: "search",
        sql: include_str!("0014_search.sql"),
    },
    Migration {
        version: 15,
        name: "native text",
        sql: include_str!("0015_native_text.sql"),
    },
    Migration {
        version: 16,
        name: "vectors",
        sql: include_str!("0016_vectors.sql"),
    },
    Migration {
        version: 17,
        name: "late vectors",
        sql: include_str!("0017_late_vectors.sql"),
    },
    Migration {
        version: 18,
        name: "search pending list",
        sql: include_str!("0018_search_pending_list.sql"),
    },
    Migration {
        version: 19,
        name: "changes",
        sql: include_str!("0019_changes.sql"),
    },
    Migration {
        version: 20,
        name: "tokenizers",
        sql: include_str!("0020_tokenizers.sql"),
    },
];

/// Every migration, for the SQL rules' test (`super::sql_rules`).
#[cfg(test)]
pub(super) fn all() -> &'static [Migration] {
    MIGRATIONS
}

/// [`statements`], for the SQL rules' test.
#[cfg(test)]
pub(super) fn statements_of(sql: &str) -> Vec<&str> {
    statements(sql)
}

/// The migration that distributes the schema on Citus: later ones find distributed tables.
const DISTRIBUTION: i64 = 7;

/// Advisory lock key serializing migrations across processes ("ctxd" in ASCII).
const MIGRATION_LOCK_KEY: i64 = 0x6374_7864;

/// Applies every migration not yet applied; returns how many it applied.
pub(super) async fn run(client: &mut Client) -> Result<usize, StoreError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await?;
    let result = apply_pending(client).await;
    // Release even after a failure; the session ending would release it too.
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_KEY])
        .await;
    let applied = result?;
    unlock?;
    Ok(applied)
}

async fn apply_pending(client: &mut Client) -> Result<usize, StoreError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS ctxd_schema_migrations (
                version    bigint PRIMARY KEY,
                name       text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await?;
    let row = client
        .query_one(
            "SELECT coalesce(max(version), 0) AS version FROM ctxd_schema_migrations",
            &[],
        )
        .await?;
    let current: i64 = super::rows::column(&row, "version")?;
    let known = MIGRATIONS.last().map_or(0, |m| m.version);
    if current > known {
        // A newer ctxd migrated this database. Refusing would stop a rolling upgrade or a
        // rollback half-way, and migrations only add: this binary's statements still hold.
        tracing::warn!(
            database = current,
            binary = known,
            "the database schema is at a migration newer than this binary knows; a newer ctxd \
             migrated it: finish the rollout (or roll back the schema) soon"
        );
    }
    let mut applied = 0;
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        let tx = client.transaction().await?;
        for statement in statements(migration.sql) {
            tx.batch_execute(statement).await?;
        }
        tx.execute(
            "INSERT INTO ctxd_schema_migrations (version, name) VALUES ($1, $2)",
            &[&migration.version, &migration.name],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "applied migration"
        );
        applied += 1;
    }
    Ok(applied)
}

/// The statements of a migration file, each without its `;`, comments and blank ones left
/// out. Quotes, quoted identifiers, comments and dollar-quoted bodies are kept whole, so a
/// `;` inside them does not split.
fn statements(sql: &str) -> Vec<&str> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    let mut push = |from: usize, to: usize| {
        let statement = sql[from..to].trim();
        if !strip_comments(statement).trim().is_empty() {
            out.push(statement);
        }
    };
    while i < bytes.len() {
        match bytes[i] {
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = sql[i..].find('\n').map_or(bytes.len(), |n| i + n);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = sql[i + 2..].find("*/").map_or(bytes.len(), |n| i + 2 + n + 2);
            }
            quote @ (b'\'' | b'"') => {
                i = sql[i + 1..]
                    .find(quote as char)
                    .map_or(bytes.len(), |n| i + 1 + n + 1);
            }
            b'$' => match dollar_tag(&sql[i..]) {
                Some(tag) => {
                    let body = i + tag.len();
                    i = sql[body..]
                        .find(tag)
                        .map_or(bytes.len(), |n| body + n + tag.len());
                }
                None => i += 1,
            },
            b';' => {
                push(start, i);
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    push(start, bytes.len());
    out
}

/// The `$tag$` that opens a dollar-quoted string at the start of `s`, if one does (`$1` is a
/// parameter, not a tag).
fn dollar_tag(s: &str) -> Option<&str> {
    let end = s[1..].find('$')? + 2;
    let tag = &s[..end];
    let name = &tag[1..end - 1];
    let valid = name
        .chars()
        .enumerate()
        .all(|(n, c)| c == '_' || c.is_ascii_alphabetic() || (n > 0 && c.is_ascii_digit()));
    valid.then_some(tag)
}

/// `statement` without its `--` line comments (enough to tell a comment-only piece).
fn strip_comments(statement: &str) -> String {
    statement
        .lines()
        .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_at_top_level_semicolons_only() {
        let sql = "-- a comment; with a semicolon\n\
                   CREATE TABLE t (a text DEFAULT 'x;y', \"b;\" int);\n\
                   /* block; comment */ ALTER TABLE t ADD COLUMN c int;\n\
                   CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $body$\n\
                   BEGIN PERFORM 1; PERFORM $1; END\n\
                   $body$;\n\
                   SELECT $$a;b$$\n\
                   -- trailing comment only;\n";
        let got = statements(sql);
        assert_eq!(got.len(), 4, "{got:#?}");
        assert!(got[0].ends_with("\"b;\" int)"));
        assert!(got[1].ends_with("ADD COLUMN c int"));
        assert!(got[2].contains("PERFORM 1; PERFORM $1; END") && got[2].ends_with("$body$"));
        assert_eq!(got[3], "SELECT $$a;b$$\n-- trailing comment only;");
    }

    #[test]
    fn every_migration_splits_into_whole_statements() {
        for migration in MIGRATIONS {
            for statement in statements(migration.sql) {
                let code = strip_comments(statement);
                let first = code.split_whitespace().next().unwrap_or_default();
                assert!(
                    ["CREATE", "ALTER", "UPDATE", "SELECT", "DROP", "INSERT", "DELETE"].contains(&first),
                    "migration {}: a piece does not start a statement: {statement}",
                    migration.version
                );
            }
        }
        let distribution = MIGRATIONS.iter().find(|m| m.version == DISTRIBUTION).unwrap();
        assert_eq!(statements(distribution.sql).len(), 8);
    }

    /// What Citus refuses on distributed tables, in `sql`: an ALTER TABLE with several
    /// subcommands, a constraint inside ADD COLUMN, a new table left undistributed.
    fn distributed_rule_violations(sql: &str) -> Vec<String> {
        let statements = statements(sql);
        let mut violations = Vec::new();
        for statement in &statements {
            let code = strip_comments(statement).to_ascii_uppercase();
            let words: Vec<&str> = code.split_whitespace().collect();
            if words.starts_with(&["ALTER", "TABLE"]) {
                if code.contains(',') {
                    violations.push(format!("several subcommands: {statement}"));
                }
                if code.contains("ADD COLUMN") && (code.contains("CHECK") || code.contains("REFERENCES")) {
                    violations.push(format!("constraint in ADD COLUMN: {statement}"));
                }
            }
            if words.starts_with(&["CREATE", "TABLE"]) {
                let name = words[2..]
                    .iter()
                    .find(|w| !["IF", "NOT", "EXISTS"].contains(w))
                    .map_or("", |w| w.trim_end_matches('('))
                    .to_ascii_lowercase();
                let call = format!("ctxd_distribute('{name}'");
                if !statements.iter().any(|s| s.to_ascii_lowercase().contains(&call)) {
                    violations.push(format!("table {name} is not distributed"));
                }
            }
        }
        violations
    }

    #[test]
    fn later_migrations_keep_to_the_distributed_rules() {
        let refused = "ALTER TABLE messages ADD COLUMN a int, ADD COLUMN b int;\n\
                       ALTER TABLE messages ADD COLUMN c int CHECK (c > 0);\n\
                       CREATE TABLE notes (tenant_id text, conversation_id text);";
        assert_eq!(distributed_rule_violations(refused).len(), 3);
        let accepted = "ALTER TABLE messages ADD COLUMN c int;\n\
                        ALTER TABLE messages ADD CONSTRAINT c_positive CHECK (c > 0);\n\
                        CREATE TABLE notes (tenant_id text, conversation_id text);\n\
                        SELECT ctxd_distribute('notes');";
        assert_eq!(distributed_rule_violations(accepted), Vec::<String>::new());
        for migration in MIGRATIONS.iter().filter(|m| m.version > DISTRIBUTION) {
            let violations = distributed_rule_violations(migration.sql);
            assert!(
                violations.is_empty(),
                "migration {}: {violations:#?}",
                migration.version
            );
        }
    }
}
