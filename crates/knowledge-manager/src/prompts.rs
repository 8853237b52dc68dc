//! The LLM prompts of the design (seed 000 section 3.5, seed 002 sections 3 and 5), adapted to
//! the types and fields this system stores.

use thinkus_common::model::Message;

/// Extraction (seed 000 extractCandidates, seed 002 extractMemoryPoints).
pub fn extract(messages: &[Message], role_id: &str, project_id: Option<&str>) -> String {
    let conversation: Vec<String> = messages
        .iter()
        .map(|m| format!("[{}]: {}", m.speaker.as_deref().unwrap_or(&m.role), m.content))
        .collect();
    format!(
        r#"从以下对话中提取值得记忆的要点。只提取用户明确表达、长期有用的信息；问题、寒暄、假设、未确认的状态、工作流脚手架、模板占位符和助手的过程描述都不要提取。内容保持用户使用的语言（中文就写中文，英文就写英文）。

当前高管: {role_id}
项目: {project}

对话:
{conversation}

返回JSON数组 (不要任何其他内容):
[{{
  "type": "project_decision|user_preference|discussion_conclusion|action_item|constraint|risk|feedback|insight|issue|learning|pattern|fact",
  "content": "完整内容",
  "summary": "50字以内摘要",
  "importance": 1-5,
  "tags": ["tag1", "tag2"],
  "relevant_role": "最相关的高管ID",
  "project_specific": true,
  "confidence": 0.0-1.0
}}]
如果没有值得记忆的内容，返回 []。"#,
        project = project_id.unwrap_or("无"),
        conversation = conversation.join("\n"),
    )
}

/// Merging similar memories (seed 002 mergeMemories).
pub fn merge(contents: &[String]) -> String {
    let list: Vec<String> = contents.iter().map(|c| format!("- {c}")).collect();
    format!(
        r#"将以下相似的记忆合并为一条，保留所有不重复的信息，保持原来的语言：

{}

返回JSON：
{{
  "mergedContent": "合并后的完整内容",
  "mergedSummary": "合并后的摘要（50字以内）",
  "importance": 1-5
}}"#,
        list.join("\n")
    )
}
