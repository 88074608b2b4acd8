//! Embedded, numbered SQL migrations, applied under a Postgres advisory lock so that any number
//! of replicas (or a `ctxd migrate` Job) can start at once.

use tokio_postgres::Client;

use crate::store::StoreError;

/// One migration: its number and SQL.
#[derive(Debug)]
struct Migration {
    version: i64,
    name: &'static str,
    sql: &'static str,
}

/// All migrations, in order. Append only: never edit one that has shipped.
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
];

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
            "SELECT coalesce(max(version), 0) FROM ctxd_schema_migrations",
            &[],
        )
        .await?;
    let current: i64 = row.get(0);
    let mut applied = 0;
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        let tx = client.transaction().await?;
        tx.batch_execute(migration.sql).await?;
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
