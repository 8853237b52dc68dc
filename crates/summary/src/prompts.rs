//! The LLM prompt of the design (seed 000 section 3.4), extended for incremental updates: the
//! summary so far is given and the complete updated summary is asked for.

use thinkus_common::ApiError;
use thinkus_common::model::{ArtifactRef, Message};

use crate::api::SummaryContent;

/// The summary prompt for new messages, the summary so far and the session's artifacts.
pub fn summarize(
    messages: &[Message],
    previous: Option<&SummaryContent>,
    artifacts: &[ArtifactRef],
    message_chars: usize,
) -> Result<String, ApiError> {
    let conversation: Vec<String> = messages
        .iter()
        .map(|m| {
            let who = match &m.speaker {
                Some(speaker) => format!("{} ({speaker})", m.role),
                None => m.role.clone(),
            };
            let content: String = m.content.chars().take(message_chars).collect();
            let cut = if m.content.chars().count() > message_chars {
                "..."
            } else {
                ""
            };
            format!("[{}] {who}: {content}{cut}", m.index)
        })
        .collect();
    let previous = match previous {
        Some(content) if !content.is_empty() => format!(
            "\n已有摘要（覆盖之前的消息）。把新消息合并进去，返回更新后的完整摘要：保留仍然成立的内容，更新已改变的决策，移除已解决的问题：\n{}\n",
            serde_json::to_string_pretty(content)
                .map_err(|err| ApiError::internal(format!("serialising the summary so far for the prompt: {err}")))?
        ),
        _ => String::new(),
    };
    let artifacts = if artifacts.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = artifacts
            .iter()
            .map(|a| format!("- {} {} {}", a.reference, a.locator, a.desc))
            .collect();
        format!("\n本会话的产物（按ref引用）:\n{}\n", list.join("\n"))
    };
    Ok(format!(
        r#"分析以下会话，生成结构化摘要。内容保持用户使用的语言（中文就写中文，英文就写英文）。约束和决策只写当前有效的：会话中后来改变的数字或选择（如预算从$500改为$800）只保留最新的。
{previous}{artifacts}
会话消息:
{conversation}

请返回JSON格式的摘要 (不要任何其他内容):
{{
  "goal": "本次会话的主要目标",
  "constraints": ["约束条件1", "约束条件2"],
  "decisions": [
    {{
      "what": "做了什么决策",
      "why": "为什么这样决策",
      "who": "哪个高管/用户",
      "confidence": "high|medium|low"
    }}
  ],
  "progress": ["完成的事项1", "完成的事项2"],
  "artifacts": [
    {{
      "ref": "ART-xxx",
      "locator": "文件路径或位置",
      "desc": "简短描述"
    }}
  ],
  "next_actions": ["下一步行动1", "下一步行动2"],
  "risks": ["风险项1", "风险项2"],
  "open_questions": ["未解决的问题1"]
}}"#,
        conversation = conversation.join("\n\n"),
    ))
}
