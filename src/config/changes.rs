//! The change feed (WatchChanges): how long changes are kept, and what a replica's watchers
//! may hold.

use std::time::Duration;

use super::problem::{ConfigProblem, Problems};

/// Change feed settings.
#[derive(Debug, Clone, clap::Args)]
pub struct ChangeArgs {
    /// How long changes are kept for WatchChanges: a consumer whose cursor is older must
    /// resync (OUT_OF_RANGE). A number with a unit: `s`, `m`, `h` or `d` (`7d`, `36h`).
    #[arg(long, env = "CTXD_CHANGES_RETENTION", default_value = "7d", value_parser = parse_duration, display_order = 60)]
    pub changes_retention: Duration,

    /// WatchChanges streams one replica serves at once; one more is RESOURCE_EXHAUSTED.
    #[arg(long, env = "CTXD_MAX_WATCHERS", default_value_t = 1024, display_order = 61)]
    pub max_watchers: usize,

    /// WatchChanges streams one tenant may hold on one replica, so that one tenant's consumers
    /// cannot take every stream the replica serves; one more is RESOURCE_EXHAUSTED.
    #[arg(
        long,
        env = "CTXD_MAX_WATCHERS_PER_TENANT",
        default_value_t = 256,
        display_order = 61
    )]
    pub max_watchers_per_tenant: usize,

    /// Milliseconds between a watcher's reads when no write on this replica woke it: how soon
    /// it sees what other replicas write.
    #[arg(long, env = "CTXD_CHANGES_POLL_MS", default_value_t = 250, display_order = 62)]
    pub changes_poll_ms: u64,

    /// Seconds between heartbeats on a stream with nothing to deliver.
    #[arg(
        long,
        env = "CTXD_CHANGES_HEARTBEAT_SECS",
        default_value_t = 15,
        display_order = 63
    )]
    pub changes_heartbeat_secs: u64,
}

/// The change feed's validated settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeOptions {
    /// How long changes are kept.
    pub retention: Duration,
    /// Streams a replica serves at once.
    pub max_watchers: usize,
    /// Streams one tenant holds on a replica at once.
    pub max_watchers_per_tenant: usize,
    /// A watcher's read interval when nothing wakes it.
    pub poll: Duration,
    /// Heartbeat interval on an idle stream.
    pub heartbeat: Duration,
}

impl Default for ChangeOptions {
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(7 * 24 * 3600),
            max_watchers: 1024,
            max_watchers_per_tenant: 256,
            poll: Duration::from_millis(250),
            heartbeat: Duration::from_secs(15),
        }
    }
}

impl ChangeArgs {
    /// Checks that every setting is positive.
    pub fn validate(&self) -> Result<ChangeOptions, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        problems.positive("CTXD_CHANGES_RETENTION", self.changes_retention.as_secs());
        problems.positive("CTXD_MAX_WATCHERS", self.max_watchers as u64);
        problems.positive(
            "CTXD_MAX_WATCHERS_PER_TENANT",
            self.max_watchers_per_tenant as u64,
        );
        problems.positive("CTXD_CHANGES_POLL_MS", self.changes_poll_ms);
        problems.positive("CTXD_CHANGES_HEARTBEAT_SECS", self.changes_heartbeat_secs);
        problems.finish(ChangeOptions {
            retention: self.changes_retention,
            max_watchers: self.max_watchers,
            max_watchers_per_tenant: self.max_watchers_per_tenant,
            poll: Duration::from_millis(self.changes_poll_ms),
            heartbeat: Duration::from_secs(self.changes_heartbeat_secs),
        })
    }
}

/// `7d`, `36h`, `90m`, `3600s` (or a bare number of seconds).
fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{raw:?} is not a duration: a number with a unit (s, m, h, d), e.g. 7d"))?;
    let seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{raw:?}: the unit is s, m, h or d")),
    };
    number
        .checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{raw:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("36h"), Ok(Duration::from_secs(129_600)));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("3600"), Ok(Duration::from_secs(3_600)));
        assert!(parse_duration("7w").is_err());
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
    }
}
