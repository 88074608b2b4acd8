//! What Citus refuses or turns into a cross-shard statement, checked against every statement
//! ctxd runs on PostgreSQL (docs/scaling.md, "Rules the SQL keeps"): each string literal of this
//! folder's sources that is a statement, and each migration's statements. Tested only; the
//! rules are heuristics over the text, not a SQL parser, and say so where they stop:
//!
//! 1. No STABLE or VOLATILE function called with a column reference in an UPDATE or a DELETE
//!    (Citus: "STABLE functions used in UPDATE queries cannot be called with column
//!    references"). Functions of the [`NOT_IMMUTABLE`] list only: a function not on it is not
//!    checked, nor are PL/pgSQL bodies.
//! 2. No STABLE or VOLATILE function at all in `ON CONFLICT ... DO UPDATE SET`.
//! 3. No UPDATE or DELETE that reaches another conversation's row (a subquery or a join whose
//!    `conversation_id` is another parameter): the router planner refuses it.
//! 4. No write that touches two conversations in one statement (an INSERT ... SELECT whose
//!    inserted conversation is not the one it reads), except where the statement says
//!    [`TWO_CONVERSATIONS`]: the fork, the one RPC with a two-phase commit.
//!
//! Fragments spliced in at run time (`format!` arguments such as `MESSAGE_COLUMNS`) are checked
//! only as part of the literal that holds them, when it is a statement of its own.

/// What a statement that writes two conversations on purpose says (a SQL comment).
pub(super) const TWO_CONVERSATIONS: &str = "-- two conversations: the fork";

/// Functions that are not IMMUTABLE in PostgreSQL 15 and that ctxd could be tempted to use.
const NOT_IMMUTABLE: [&str; 18] = [
    "jsonb_build_object",
    "jsonb_build_array",
    "json_build_object",
    "json_build_array",
    "to_jsonb",
    "to_json",
    "row_to_json",
    "jsonb_agg",
    "now",
    "statement_timestamp",
    "clock_timestamp",
    "transaction_timestamp",
    "random",
    "gen_random_uuid",
    "nextval",
    "age",
    // Of a timestamptz: STABLE (the time zone).
    "extract",
    "date_part",
];

/// The rules `statement` breaks, each in a line.
pub(super) fn violations(statement: &str) -> Vec<String> {
    let code = without_comments(statement).to_ascii_lowercase();
    let code = code.trim();
    let mut out = Vec::new();
    let updates = code.starts_with("update") || code.contains(") update ") || code.starts_with("delete");
    if updates {
        for (name, args) in calls(code) {
            if NOT_IMMUTABLE.contains(&name) && has_column_reference(args) {
                out.push(format!(
                    "rule 1: {name}(...) with a column reference in an UPDATE or DELETE"
                ));
            }
        }
        let conversations = conversation_parameters(code);
        if conversations.len() > 1 {
            out.push(format!(
                "rule 3: an UPDATE or DELETE reaching conversations {conversations:?} (another shard)"
            ));
        }
    }
    if let Some(at) = code.find("do update set") {
        for (name, _) in calls(&code[at..]) {
            if NOT_IMMUTABLE.contains(&name) {
                out.push(format!("rule 2: {name}(...) in ON CONFLICT DO UPDATE SET"));
            }
        }
    }
    if code.contains("insert into")
        && !statement.contains(TWO_CONVERSATIONS)
        && let Some(written) = inserted_conversation(code)
    {
        let read = conversation_parameters(code);
        if read.iter().any(|r| *r != written) {
            out.push(format!(
                "rule 4: inserts conversation {written} while reading {read:?} in one statement"
            ));
        }
    }
    out
}

/// `sql` without its `--` comments.
fn without_comments(sql: &str) -> String {
    sql.lines()
        .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every function call of `code` (lower case): its name and its argument text.
fn calls(code: &str) -> Vec<(&str, &str)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for (open, _) in code.match_indices('(') {
        let start = code[..open]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let name = &code[start..open];
        if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
            continue;
        }
        let mut depth = 0;
        let mut end = open;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push((name, &code[open + 1..end.max(open + 1)]));
    }
    out
}

/// Whether `args` name a column: a word that is not a parameter, a literal, a keyword or a
/// type, nor a function's name.
fn has_column_reference(args: &str) -> bool {
    const NOT_COLUMNS: [&str; 16] = [
        "text",
        "jsonb",
        "json",
        "bigint",
        "int",
        "integer",
        "null",
        "true",
        "false",
        "as",
        "and",
        "or",
        "not",
        "is",
        "interval",
        "timestamptz",
    ];
    let mut literal = false;
    let mut words = Vec::new();
    let mut word = String::new();
    for c in args.chars() {
        if c == '\'' {
            literal = !literal;
            continue;
        }
        if literal {
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            words.push((std::mem::take(&mut word), c == '('));
        }
    }
    if !word.is_empty() {
        words.push((word, false));
    }
    words.iter().any(|(w, is_call)| {
        let first = w.chars().next().unwrap_or('0');
        !is_call && (first.is_ascii_alphabetic() || first == '_') && !NOT_COLUMNS.contains(&w.as_str())
    })
}

/// The parameters `code` compares a `conversation_id` with (`conversation_id = $2`), in order
/// of first use.
fn conversation_parameters(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("conversation_id = $") {
        let digits: String = code[at + "conversation_id = $".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let parameter = format!("${digits}");
        if !out.contains(&parameter) {
            out.push(parameter);
        }
    }
    out
}

/// The parameter an `INSERT INTO t (..., conversation_id, ...) SELECT ...` writes as the
/// conversation, when it is one.
fn inserted_conversation(code: &str) -> Option<String> {
    let columns_at = code.find("insert into")?;
    let open = code[columns_at..].find('(')? + columns_at;
    let close = code[open..].find(')')? + open;
    let columns: Vec<&str> = code[open + 1..close].split(',').map(str::trim).collect();
    let index = columns.iter().position(|c| *c == "conversation_id")?;
    let rest = &code[close..];
    let select = rest.find("select ")? + close + "select ".len();
    let item = code[select..].split(',').nth(index)?.trim();
    item.starts_with('$').then(|| item.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every statement literal of the PostgreSQL store's sources.
    fn source_statements() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/postgres");
        let mut files = vec![root.clone()];
        let mut out = Vec::new();
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("sql_rules.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for literal in string_literals(&text) {
                let code = without_comments(&literal).trim().to_ascii_lowercase();
                let is_statement = ["select ", "insert ", "update ", "delete ", "with "]
                    .iter()
                    .any(|k| code.starts_with(k));
                if is_statement {
                    out.push((path.display().to_string(), literal));
                }
            }
        }
        out
    }

    /// The contents of the `"..."` literals of Rust source `text` (escapes kept as written).
    fn string_literals(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '/' && text[i..].starts_with("//") {
                while chars.peek().is_some_and(|(_, c)| *c != '\n') {
                    chars.next();
                }
            } else if c == '\'' {
                // A char literal ('"') or a lifetime: skip a quoted char.
                if text[i..].starts_with("'\"'") || text[i..].starts_with("'\\\"'") {
                    chars.nth(if text[i..].starts_with("'\"'") { 1 } else { 2 });
                }
            } else if c == '"' {
                let mut literal = String::new();
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, next)) = chars.next() {
                                literal.push(next);
                            }
                        }
                        '"' => break,
                        c => literal.push(c),
                    }
                }
                out.push(literal);
            }
        }
        out
    }

    #[test]
    fn the_rules_catch_what_citus_refused() {
        // Migration 9 as it was: a STABLE function with column references in an UPDATE.
        let migration = "UPDATE conversations\n SET listing = jsonb_build_object('t', tenant_id, 's', status, 'l', labels)";
        assert!(
            violations(migration)[0].starts_with("rule 1"),
            "{:?}",
            violations(migration)
        );
        // UpdateConversation as it was.
        let update = "UPDATE conversations SET title = coalesce($3, title),
             listing = jsonb_build_object('t', tenant_id, 's', coalesce($4, status), 'l', coalesce($5, labels)),
             updated_at = greatest(updated_at, statement_timestamp())
             WHERE tenant_id = $1 AND conversation_id = $2";
        assert!(violations(update).iter().any(|v| v.starts_with("rule 1")));
        // The fork's watermark as it was: an UPDATE reading another conversation's row.
        let fork = "UPDATE conversations SET embedded_through = least(
             (SELECT embedded_through FROM conversations WHERE tenant_id = $1 AND conversation_id = $2), $3)
             WHERE tenant_id = $1 AND conversation_id = $4";
        assert!(
            violations(fork).iter().any(|v| v.starts_with("rule 3")),
            "{:?}",
            violations(fork)
        );
        // The embedding watermark's compare-and-set as it was: extract() of a timestamptz column.
        let watermark = "UPDATE conversations c SET embedded_through = $3
             WHERE c.tenant_id = $1 AND c.conversation_id = $2 AND c.embedded_through = $4
               AND (extract(epoch FROM c.created_at) * 1000000)::bigint = $7";
        assert!(
            violations(watermark)[0].starts_with("rule 1"),
            "{:?}",
            violations(watermark)
        );
        // A volatile function in DO UPDATE SET, and a copy between conversations unannounced.
        let upsert = "INSERT INTO t (tenant_id, conversation_id, at) VALUES ($1, $2, $3)
             ON CONFLICT (tenant_id, conversation_id) DO UPDATE SET at = clock_timestamp()";
        assert!(violations(upsert)[0].starts_with("rule 2"));
        let copy = "INSERT INTO messages (tenant_id, conversation_id, sequence)
             SELECT tenant_id, $4, sequence FROM messages WHERE tenant_id = $1 AND conversation_id = $2";
        assert!(violations(copy)[0].starts_with("rule 4"));
        assert!(violations(&format!("{TWO_CONVERSATIONS}\n{copy}")).is_empty());
        // What is fine: the time without a column, immutable functions with columns.
        let fine = "UPDATE conversations SET updated_at = greatest(updated_at, statement_timestamp()),
             listing = jsonb_set(jsonb_object(ARRAY['t', tenant_id, 's', status]), '{l}', labels)
             WHERE tenant_id = $1 AND conversation_id = $2";
        assert_eq!(violations(fine), Vec::<String>::new());
    }

    #[test]
    fn every_statement_ctxd_runs_keeps_to_the_distributed_rules() {
        let statements = source_statements();
        assert!(statements.len() > 60, "found {} statements", statements.len());
        let mut broken = Vec::new();
        for (file, statement) in &statements {
            for violation in violations(statement) {
                broken.push(format!("{file}: {violation}\n  {statement}"));
            }
        }
        for migration in super::super::migrations::all() {
            for statement in super::super::migrations::statements_of(migration.sql) {
                for violation in violations(statement) {
                    broken.push(format!(
                        "migration {}: {violation}\n  {statement}",
                        migration.version
                    ));
                }
            }
        }
        assert!(broken.is_empty(), "{}", broken.join("\n"));
    }
}
