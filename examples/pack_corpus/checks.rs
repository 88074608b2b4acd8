//! What the pack itself must show, beyond what the provider rules check on the rendering:
//! the promises of the stats and of context editing.

use std::collections::HashMap;

use ctxd::domain::{Role, context::ContextPack};

/// The start of a cleared result's placeholder (docs/design.md, "Context editing").
const CLEARED: &str = "[tool result cleared to save context";

/// The problems `pack` shows: a cleared result whose call keeps its arguments though the
/// request asked to clear them (and the call carries no reasoning, signature or native JSON),
/// and `over_budget` on a pack that fits its budget.
pub(crate) fn pack_problems(pack: &ContextPack, clears_arguments: bool) -> Vec<String> {
    let mut problems = Vec::new();
    if clears_arguments {
        let calls: HashMap<&str, (&ctxd::domain::Message, &str)> = pack
            .messages
            .iter()
            .flat_map(|m| {
                m.message
                    .tool_calls
                    .iter()
                    .map(move |c| (c.id.as_str(), (&m.message, c.arguments.as_str())))
            })
            .collect();
        for m in pack.messages.iter().filter(|m| m.message.role == Role::Tool) {
            if !m.message.content.starts_with(CLEARED) {
                continue;
            }
            let id = m.message.tool_call_id.as_deref().unwrap_or_default();
            let Some((call, arguments)) = calls.get(id) else {
                continue;
            };
            let plain = call.native.is_none()
                && call.reasoning.is_empty()
                && call.tool_calls.iter().all(|c| c.signature.is_empty());
            let empty = arguments.trim().is_empty() || *arguments == "{}";
            if plain && !call.pinned && !empty {
                problems.push(format!(
                    "call {id:?} keeps its arguments though its result was cleared"
                ));
            }
        }
    }
    let stats = &pack.stats;
    if stats.over_budget && stats.total_tokens <= stats.budget_tokens {
        problems.push(format!(
            "over_budget though the pack fits ({} of {} tokens)",
            stats.total_tokens, stats.budget_tokens
        ));
    }
    problems
}

/// Prints `pack` (`CORPUS_DUMP=seed:n:r`): each message's source, sequence, role, tokens, the
/// start of its text and its calls, then the stats.
pub(crate) fn dump(pack: &ContextPack) {
    for m in &pack.messages {
        let text: String = m.message.content.chars().take(60).collect();
        let calls: Vec<String> = m
            .message
            .tool_calls
            .iter()
            .map(|c| format!("{}({})", c.id, c.arguments.chars().take(30).collect::<String>()))
            .collect();
        // The native JSON's block or item types, in order.
        let native: Vec<&str> = m
            .message
            .native
            .iter()
            .flat_map(|n| n.json.as_array().into_iter().flatten())
            .map(|b| b["type"].as_str().unwrap_or("message"))
            .collect();
        eprintln!(
            "{:?} {:?} {:?} {} {text:?} {calls:?} {:?} pinned={} native={native:?}",
            m.source,
            m.sequence.map(|s| s.get()),
            m.message.role,
            m.tokens,
            m.message.tool_call_id,
            m.message.pinned
        );
    }
    eprintln!("{:?}", pack.stats);
}
