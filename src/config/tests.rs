//! Configuration as a whole: defaults, and problems reported together across groups.

use clap::Parser;

use super::*;

fn parse(args: &[&str]) -> Config {
    Cli::try_parse_from(std::iter::once("ctxd").chain(args.iter().copied()))
        .unwrap()
        .config
}

fn problems(args: &[&str]) -> Vec<ConfigProblem> {
    parse(args).validate().unwrap_err().problems
}

#[test]
fn defaults_validate_to_an_in_memory_server_on_50051() {
    let settings = parse(&[]).validate().unwrap();
    assert_eq!(settings.server.listen.port(), 50051);
    assert!(settings.database.url.is_none());
    assert_eq!(settings.auth.default_tenant.as_str(), "default");
    assert!(settings.auth.api_keys.is_empty());
}

#[test]
fn the_inspector_is_served_only_in_the_development_default_unless_asked() {
    let key = format!("{}=acme", "ab".repeat(32));
    let inspector = |args: &[&str]| parse(args).validate().unwrap().inspector();
    assert!(inspector(&[]), "in memory without keys");
    assert!(!inspector(&["--api-keys", &key]), "keys configured");
    assert!(!inspector(&["--database-url", "postgres://localhost/ctxd"]));
    assert!(inspector(&["--api-keys", &key, "--inspector", "true"]));
    assert!(!inspector(&["--inspector", "false"]));
    assert!(inspector(&[
        "--database-url",
        "postgres://localhost/ctxd",
        "--inspector",
        "yes"
    ]));
}

#[test]
fn every_problem_is_reported_at_once() {
    let problems = problems(&[
        "--database-url",
        "not a url",
        "--default-tenant",
        "bad/tenant",
        "--max-content-bytes",
        "0",
    ]);
    assert_eq!(problems.len(), 3, "{problems:?}");
}

#[test]
fn a_per_field_limit_above_the_request_limit_is_refused() {
    let problems = problems(&["--max-request-bytes", "1000"]);
    assert!(
        matches!(
            problems[..],
            [
                ConfigProblem::AboveRequestLimit {
                    setting: "CTXD_MAX_CONTENT_BYTES"
                },
                ConfigProblem::AboveRequestLimit {
                    setting: "CTXD_MAX_ATTACHMENT_BYTES"
                },
            ]
        ),
        "{problems:?}"
    );
}

#[test]
fn the_endpoint_is_checked_only_when_an_engine_calls_it() {
    let endpoint = ["--openai-base-url", "ftp://x", "--openai-context-tokens", "100"];
    assert!(parse(&endpoint).validate().is_ok());
    let with_engine = [&endpoint[..], &["--summarizer", "openai"]].concat();
    assert_eq!(problems(&with_engine).len(), 2);
}

#[test]
fn tls_needs_both_halves_and_readable_files() {
    assert!(matches!(
        problems(&["--tls-cert", "/x.pem"])[..],
        [ConfigProblem::TlsHalfConfigured]
    ));
    assert!(matches!(
        problems(&["--tls-client-ca", "/ca.pem"])[..],
        [ConfigProblem::ClientCaWithoutTls]
    ));
    let missing = problems(&["--tls-cert", "/nonexistent/c", "--tls-key", "/nonexistent/k"]);
    assert!(
        matches!(
            missing[..],
            [
                ConfigProblem::Unreadable {
                    setting: "CTXD_TLS_CERT",
                    ..
                },
                ConfigProblem::Unreadable {
                    setting: "CTXD_TLS_KEY",
                    ..
                },
            ]
        ),
        "{missing:?}"
    );
}

#[test]
fn api_key_problems_name_where_the_entry_came_from() {
    let problems = problems(&["--api-keys", "abc=acme"]);
    assert!(
        matches!(
            &problems[..],
            [ConfigProblem::ApiKey {
                origin: KeyOrigin::List,
                source: KeyEntryError::NotSha256,
            }]
        ),
        "{problems:?}"
    );
}

#[test]
fn auto_summarize_keeps_half_its_threshold_by_default() {
    let settings = parse(&["--auto-summarize-tokens", "8000"]).validate().unwrap();
    let auto = settings.summarizer.auto_summarize.unwrap();
    assert_eq!((auto.threshold, auto.keep_recent_tokens), (8000, 4000));
}

#[test]
fn traces_follow_the_standard_variables_and_refuse_what_ctxd_cannot_do() {
    let traces = |args: &[&str]| parse(args).validate().unwrap().telemetry.traces;
    assert_eq!(traces(&[]), None, "off without an endpoint");
    let http = traces(&["--otel-endpoint", "http://collector:4318/"]).unwrap();
    assert_eq!(http.endpoint, "http://collector:4318/v1/traces");
    assert_eq!(http.protocol, TraceProtocol::HttpProtobuf);
    assert_eq!(
        http.sampler,
        TraceSampler::ParentBased(ParentlessSampler::AlwaysOn)
    );
    let grpc = traces(&[
        "--otel-endpoint",
        "http://collector:4317",
        "--otel-protocol",
        "grpc",
        "--otel-sampler",
        "parentbased_traceidratio",
        "--otel-sampler-arg",
        "0.25",
    ])
    .unwrap();
    assert_eq!(grpc.endpoint, "http://collector:4317");
    assert_eq!(
        grpc.sampler,
        TraceSampler::ParentBased(ParentlessSampler::Ratio(0.25))
    );
    let given = traces(&["--otel-traces-endpoint", "https://x.example/otlp/traces"]).unwrap();
    assert_eq!(given.endpoint, "https://x.example/otlp/traces", "used as given");
    for bad in [
        &["--otel-endpoint", "http://c:4318", "--otel-protocol", "http/json"][..],
        &["--otel-endpoint", "http://c:4318", "--otel-sampler", "sometimes"],
        &["--otel-endpoint", "http://c:4318", "--otel-sampler-arg", "2"],
        &["--otel-endpoint", "collector:4318"],
    ] {
        let found = problems(bad);
        assert!(
            matches!(found.as_slice(), [ConfigProblem::Traces { .. }]),
            "{bad:?}: {found:?}"
        );
    }
}
