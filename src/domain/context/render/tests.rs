use serde_json::Value;

use super::{openai_chat::openai_message, *};
use crate::domain::{
    Sequence,
    context::Source,
    message::{AttachmentSource, LlmError, Message, Role, ToolCall},
};

fn packed(message: Message) -> ContextMessage {
    ContextMessage {
        source: Source::History,
        sequence: Some(Sequence::ZERO.plus(1)),
        tokens: 1,
        message,
    }
}

#[test]
fn anthropic_packs_carry_no_blank_text_no_trailing_prefill_whitespace_and_only_accepted_images() {
    let text = |role, content: &str| packed(Message::text(role, content.into()));
    let svg = Message {
        attachments: vec![Attachment {
            mime_type: "image/svg+xml".into(),
            filename: "logo.svg".into(),
            source: AttachmentSource::Data(b"<svg/>".to_vec()),
            width: 0,
            height: 0,
        }],
        ..Message::text(Role::User, " ".into())
    };
    let pack = vec![
        packed(svg),
        text(Role::Assistant, " "),
        text(Role::User, "go on"),
        text(Role::Assistant, "Sure: "),
    ];
    let rendered: Value = serde_json::from_str(&render(&pack, Format::AnthropicMessages)).unwrap();
    let messages = rendered["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "the blank assistant turn is gone: {rendered}");
    let first = messages[0]["content"].as_array().unwrap();
    assert_eq!(first.len(), 2, "no blank text block: {first:?}");
    assert!(
        first.iter().all(|b| b["type"] == "text"),
        "an SVG is a reference, not an image block"
    );
    assert_eq!(first[1]["text"], "go on");
    assert_eq!(messages[1]["content"][0]["text"], "Sure:");
}

#[test]
fn the_direct_openai_writer_prints_what_the_value_tree_prints() {
    let text = |role, content: &str| Message::text(role, content.into());
    let messages = vec![
        text(Role::System, "Be \"careful\"\n\t\u{1}é😀"),
        Message {
            name: "ann".into(),
            ..text(Role::User, "hi </script> \\ ")
        },
        Message {
            tool_calls: vec![ToolCall::new("c\"1", "get", r#"{"a": [1, "x"]}"#)],
            name: "bot".into(),
            ..text(Role::Assistant, "")
        },
        Message {
            tool_call_id: Some("c\"1".into()),
            name: "ignored".into(),
            ..text(Role::Tool, "result")
        },
        Message {
            error: Some(LlmError {
                code: "timeout".into(),
                message: "slow".into(),
                partial_output: "half an answ".into(),
            }),
            ..text(Role::Assistant, "")
        },
        text(Role::Assistant, ""),
    ];
    let packed: Vec<ContextMessage> = messages.into_iter().map(packed).collect();
    let tree = Value::Array(packed.iter().map(|m| openai_message(&m.message)).collect()).to_string();
    assert_eq!(render(&packed, Format::OpenAiChat), tree);
}

fn openai_reasoning(id: &str) -> crate::domain::Reasoning {
    crate::domain::Reasoning {
        data: "enc".into(),
        id: id.into(),
        ..crate::domain::Reasoning::new(crate::domain::Provider::OpenAi, "reasoning")
    }
}

#[test]
fn responses_reasoning_goes_only_where_an_item_with_an_id_follows_it() {
    let paired = Message {
        reasoning: vec![openai_reasoning("rs_1")],
        content_item_id: "msg_1".into(),
        ..Message::text(Role::Assistant, "answer".into())
    };
    let items: Value = serde_json::from_str(&render(&[packed(paired)], Format::OpenAiResponses)).unwrap();
    assert_eq!(items[0]["id"], "rs_1");
    assert_eq!(items[1]["id"], "msg_1");
    // The text's item id was not stored: the reasoning would pair with nothing (a 400), so
    // it stays out, and so does the call's id, which pairs with nothing either.
    let unpaired = Message {
        reasoning: vec![openai_reasoning("rs_2")],
        tool_calls: vec![ToolCall {
            item_id: "fc_2".into(),
            ..ToolCall::new("c", "f", "{}")
        }],
        ..Message::text(Role::Assistant, "answer".into())
    };
    let rendered = render(&[packed(unpaired)], Format::OpenAiResponses);
    assert!(
        !rendered.contains("rs_2") && !rendered.contains("fc_2"),
        "{rendered}"
    );
}

#[test]
fn a_native_reasoning_item_before_a_call_without_its_id_stays_out_of_packs() {
    // A reply with two reasoning items, the second just before calls appended without their
    // `fc_` ids (issue 60, case 6a): that reasoning pairs with nothing, so the pack leaves it
    // out; the first still pairs with the message after it, which keeps its id.
    let output = serde_json::json!({"id": "resp_1", "object": "response", "status": "completed", "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e1"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Looking.", "annotations": []}]},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "e2"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "status": "completed"},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}", "status": "completed"}
    ]});
    let mut v = crate::domain::Violations::default();
    let parsed =
        crate::domain::append::parse_native(Format::OpenAiResponses, &output.to_string(), "t", &mut v);
    assert!(v.is_empty(), "{v}");
    let message = parsed.messages.into_iter().next().unwrap();
    let items: Value =
        serde_json::from_str(&render(&[packed(message.clone())], Format::OpenAiResponses)).unwrap();
    let ids: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(ids, ["rs_1", "msg_1", "-", "-"]);
    // History is what was appended.
    let listed: Value = serde_json::from_str(&render_as(
        &[packed(message)],
        Format::OpenAiResponses,
        Mode::History,
    ))
    .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 5);
}

/// One native Responses `Response` (its `output` items), parsed as an append parses it.
fn responses_reply(output: Value) -> Message {
    let response =
        serde_json::json!({"id": "resp_1", "object": "response", "status": "completed", "output": output});
    let mut v = crate::domain::Violations::default();
    let parsed =
        crate::domain::append::parse_native(Format::OpenAiResponses, &response.to_string(), "t", &mut v);
    assert!(v.is_empty(), "{v}");
    parsed.messages.into_iter().next().unwrap()
}

#[test]
fn a_plain_result_of_a_built_in_call_goes_as_that_calls_output_item() {
    // A shell call and a patch call, answered by plain tool results (issue 60): the API pairs
    // each built-in call with its own output type and refuses a `function_call_output`.
    let calls = responses_reply(serde_json::json!([
        {"type": "shell_call", "call_id": "sh1", "action": {"commands": ["ls"]}, "status": "completed"},
        {"type": "apply_patch_call", "call_id": "ap1", "status": "completed",
         "operation": {"type": "delete_file", "path": "a.txt"}},
        {"type": "function_call", "call_id": "fn1", "name": "f", "arguments": "{}", "status": "completed"}
    ]));
    let result = |id: &str, text: &str| Message {
        tool_call_id: Some(id.into()),
        ..Message::text(Role::Tool, text.into())
    };
    let pack = [
        packed(Message::text(Role::User, "clean up".into())),
        packed(calls),
        packed(result("sh1", "a.txt\n")),
        packed(result("ap1", "deleted")),
        packed(result("fn1", "ok")),
    ];
    let items: Value = serde_json::from_str(&render(&pack, Format::OpenAiResponses)).unwrap();
    let outputs: Vec<&Value> = items.as_array().unwrap()[4..].iter().collect();
    assert_eq!(
        outputs[0],
        &serde_json::json!({"type": "shell_call_output", "call_id": "sh1", "output": [
            {"stdout": "a.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]})
    );
    assert_eq!(
        outputs[1],
        &serde_json::json!({"type": "apply_patch_call_output", "call_id": "ap1", "status": "completed", "output": "deleted"})
    );
    assert_eq!(outputs[2]["type"], "function_call_output");
}

#[test]
fn built_in_calls_and_programs_without_their_reasoning_lose_their_ids_or_stay_out() {
    // A reply without reasoning (a model that has none, or reasoning left out): a shell
    // call's id would pair with no reasoning item, so it goes without; a `program` and its
    // output cannot go without theirs, so they stay out of the pack.
    let reply = responses_reply(serde_json::json!([
        {"type": "program", "id": "prg_1", "call_id": "p1", "code": "await x()", "fingerprint": "fp"},
        {"type": "program_output", "id": "prgo_1", "call_id": "p1", "result": "done", "status": "completed"},
        {"type": "shell_call", "id": "sh_1", "call_id": "sh1", "action": {"commands": ["ls"]}, "status": "completed"}
    ]));
    let pack = [packed(Message::text(Role::User, "go".into())), packed(reply)];
    let items: Value = serde_json::from_str(&render(&pack, Format::OpenAiResponses)).unwrap();
    let kinds: Vec<(&str, bool)> = items.as_array().unwrap()[1..]
        .iter()
        .map(|i| (i["type"].as_str().unwrap(), i.get("id").is_some()))
        .collect();
    assert_eq!(kinds, [("shell_call", false)]);
}

#[test]
fn responses_input_files_are_only_the_documented_types_and_carry_an_extension() {
    let file = |mime: &str, filename: &str| Attachment {
        mime_type: mime.into(),
        filename: filename.into(),
        source: AttachmentSource::Data(b"x".to_vec()),
        width: 0,
        height: 0,
    };
    let message = Message {
        attachments: vec![
            file("application/pdf", "spec.pdf"),
            file("text/markdown", "README"),
            file("APPLICATION/PDF", ""),
            file("text/x-rust", "main.rs"),
            file("text/plain; charset=utf-8", "v1.2/notes"),
            file("application/pdf", "report.final"),
            file("audio/mpeg", "voice.mp3"),
            file("application/zip", "code.zip"),
            file("application/vnd.google-apps.document", "plan"),
            file("video/mp4", "clip.mp4"),
        ],
        ..Message::text(Role::User, "see attached".into())
    };
    let items: Value = serde_json::from_str(&render(&[packed(message)], Format::OpenAiResponses)).unwrap();
    let parts = items[0]["content"].as_array().unwrap();
    let files: Vec<&str> = parts
        .iter()
        .filter(|p| p["type"] == "input_file")
        .map(|p| p["filename"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            "spec.pdf",
            "README.md",
            "file.pdf",
            "main.rs.txt",
            "v1.2/notes.txt",
            "report.final.pdf"
        ]
    );
    let data: Vec<&str> = parts.iter().filter_map(|p| p["file_data"].as_str()).collect();
    assert!(data[4].starts_with("data:text/plain;base64,"), "{}", data[4]);
    let notes: Vec<&str> = parts
        .iter()
        .filter(|p| p["type"] == "input_text")
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(notes.len(), 5, "the text and four references: {notes:?}");
    assert!(notes[1].contains("voice.mp3") && notes[3].contains("plan") && notes[4].contains("clip.mp4"));
}

#[test]
fn tool_call_ids_are_made_valid_for_anthropic_and_chat_completions_and_still_pair() {
    let long = "fc_0f0e50a1476a6c35006912c58dc9f8819192c25864eb16f07f";
    let ids = [
        "toolu_01A09q90qw90lq917835lq9",
        "functions.Bash:0",
        "functions.Bash_0",
        long,
    ];
    let call = Message {
        tool_calls: ids.iter().map(|id| ToolCall::new(*id, "f", "{}")).collect(),
        ..Message::text(Role::Assistant, String::new())
    };
    let results = ids.iter().map(|id| Message {
        tool_call_id: Some((*id).into()),
        ..Message::text(Role::Tool, "r".into())
    });
    let pack: Vec<ContextMessage> = std::iter::once(Message::text(Role::User, "q".into()))
        .chain(std::iter::once(call))
        .chain(results)
        .map(packed)
        .collect();

    let anthropic: Value = serde_json::from_str(&render(&pack, Format::AnthropicMessages)).unwrap();
    let strings = |list: &Value, key: &str| -> Vec<String> {
        let items = list.as_array().unwrap().iter();
        items.map(|item| item[key].as_str().unwrap().to_owned()).collect()
    };
    let uses = strings(&anthropic["messages"][1]["content"], "id");
    let answers = strings(&anthropic["messages"][2]["content"], "tool_use_id");
    assert_eq!(uses, answers, "each result still answers its call");
    assert_eq!(uses[0], ids[0], "a valid id goes as it is");
    assert_eq!(uses[3], long);
    assert!(uses[1].starts_with("functions_Bash_0_") && uses[1].len() == "functions_Bash_0_".len() + 12);
    assert_ne!(uses[1], uses[2], "ids that differ stay different");
    assert!(uses.iter().all(|id| id.chars().all(api_name_char)), "{uses:?}");

    let chat: Value = serde_json::from_str(&render(&pack, Format::OpenAiChat)).unwrap();
    let calls = strings(&chat[1]["tool_calls"], "id");
    let answers: Vec<&str> = (2..6)
        .map(|i| chat[i]["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(calls, answers);
    assert_eq!(
        &calls[..3],
        &ids[..3],
        "ids of 40 characters or fewer go as they are"
    );
    assert_eq!(calls[3].len(), 40);
    assert!(calls[3].starts_with(&long[..27]));
}

#[test]
fn anthropic_packs_carry_inline_images_of_at_most_5_mb_in_base64() {
    let image = |bytes: usize| Attachment {
        mime_type: "image/png".into(),
        filename: format!("{bytes}.png"),
        source: AttachmentSource::Data(vec![0; bytes]),
        width: 0,
        height: 0,
    };
    // 3,932,160 bytes are exactly 5 MiB of base64; one more is over.
    let message = Message {
        attachments: vec![image(3_932_160), image(3_932_161)],
        ..Message::text(Role::User, "see".into())
    };
    let rendered: Value =
        serde_json::from_str(&render(&[packed(message)], Format::AnthropicMessages)).unwrap();
    let blocks = rendered["messages"][0]["content"].as_array().unwrap();
    let kinds: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "image", "text"]);
    assert_eq!(
        blocks[1]["source"]["data"].as_str().unwrap().len(),
        5 * 1024 * 1024
    );
    assert!(blocks[2]["text"].as_str().unwrap().contains("3932161.png"));
}

#[test]
fn openai_packs_carry_names_of_the_pattern_openai_takes() {
    let user = Message {
        name: "Ann Lee".into(),
        ..Message::text(Role::User, "q".into())
    };
    let call = Message {
        tool_calls: vec![ToolCall::new("c1", "mcp.github/search", "{}")],
        name: "bot".into(),
        ..Message::text(Role::Assistant, String::new())
    };
    let result = Message {
        tool_call_id: Some("c1".into()),
        ..Message::text(Role::Tool, "r".into())
    };
    let pack: Vec<ContextMessage> = [user, call, result].into_iter().map(packed).collect();
    let chat: Value = serde_json::from_str(&render(&pack, Format::OpenAiChat)).unwrap();
    assert_eq!(chat[0]["name"], "Ann_Lee");
    assert_eq!(chat[1]["name"], "bot");
    assert_eq!(chat[1]["tool_calls"][0]["function"]["name"], "mcp_github_search");
    let items: Value = serde_json::from_str(&render(&pack, Format::OpenAiResponses)).unwrap();
    assert_eq!(items[1]["name"], "mcp_github_search");
    let long = "n".repeat(70);
    assert_eq!(
        crate::domain::context::cost::openai_name(&long).unwrap().len(),
        64
    );
    assert_eq!(crate::domain::context::cost::openai_name(""), None);
}

#[test]
fn gemini_current_turn_calls_without_a_signature_get_the_documented_placeholder() {
    let call = |id: &str| Message {
        tool_calls: vec![ToolCall::new(id, "f", "{}")],
        ..Message::text(Role::Assistant, String::new())
    };
    let result = |id: &str| Message {
        tool_call_id: Some(id.into()),
        ..Message::text(Role::Tool, "r".into())
    };
    let pack: Vec<ContextMessage> = [
        Message::text(Role::User, "q1".into()),
        call("a"),
        result("a"),
        Message::text(Role::Assistant, "done".into()),
        Message::text(Role::User, "q2".into()),
        call("b"),
        result("b"),
    ]
    .into_iter()
    .map(packed)
    .collect();
    let body: Value = serde_json::from_str(&render(&pack, Format::Gemini)).unwrap();
    let contents = body["contents"].as_array().unwrap();
    assert!(
        contents[1]["parts"][0].get("thoughtSignature").is_none(),
        "an earlier turn is left as it is"
    );
    assert_eq!(
        contents[5]["parts"][0]["thoughtSignature"],
        "skip_thought_signature_validator"
    );
}
