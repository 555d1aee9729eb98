// Conformance checks: streaming (SSE) framing and chunk rules, chat and legacy completions.
#include "lab/conform/probe.h"

namespace inferlab::lab::conform {
namespace {

// `need_chunks` false: a framing check, which reads the raw bytes and says what is wrong with them.
Stream chat_stream(Probe& p, const json& extra = json::object(), bool need_chunks = true) {
  json body = p.chat({{"max_tokens", 8}, {"temperature", 0}, {"stream", true}});
  body.update(extra);
  Stream s = p.stream("/v1/chat/completions", body);
  require(s.status == 200, fmt::format("status {}", s.status));
  if (need_chunks) require(!s.chunks.empty(), "no event of the stream is a JSON object (see stream.separators)");
  return s;
}

Stream completion_stream(Probe& p, const json& extra = json::object()) {
  json body = p.completion({{"max_tokens", 8}, {"temperature", 0}, {"stream", true}});
  body.update(extra);
  Stream s = p.stream("/v1/completions", body);
  require(s.status == 200, fmt::format("status {}", s.status));
  require(!s.chunks.empty(), "no event of the stream is a JSON object");
  return s;
}

// The chunks that carry choices (not the usage-only last chunk).
std::vector<const json*> choice_chunks(const Stream& s) {
  std::vector<const json*> out;
  for (const json& c : s.chunks)
    if (c.contains("choices") && c["choices"].is_array() && !c["choices"].empty()) out.push_back(&c);
  return out;
}

std::string content_type(Probe& p) {
  Stream s = chat_stream(p, json::object(), false);
  const std::string type = s.header("content-type");
  require(type.starts_with("text/event-stream"), fmt::format("Content-Type \"{}\" (expected text/event-stream)", type));
  return type;
}

// Every line is `data: ...` or an SSE comment; events end with a blank line (\n\n), no \r.
std::string data_lines(Probe& p) {
  Stream s = chat_stream(p, json::object(), false);
  std::size_t at = 0, lines = 0;
  while (at < s.body.size()) {
    std::size_t end = s.body.find('\n', at);
    if (end == std::string::npos) end = s.body.size();
    const std::string line = s.body.substr(at, end - at);
    if (!line.empty() && !line.starts_with("data: ") && !line.starts_with(":"))
      fail_check("a line that is neither `data: ` nor an SSE comment", cut(line));
    lines += !line.empty();
    at = end + 1;
  }
  return fmt::format("{} data/comment lines", lines);
}

std::string separators(Probe& p) {
  Stream s = chat_stream(p, json::object(), false);
  require(s.body.find('\r') == std::string::npos, "\\r in the stream (OpenAI separates with \\n only)");
  require(s.body.ends_with("\n\n"), "the stream does not end with a blank line");
  // Each event one data line followed by a blank line: no two data lines in a row.
  std::size_t at = 0;
  while ((at = s.body.find("\ndata: ", at)) != std::string::npos) {
    if (at == 0 || s.body[at - 1] != '\n') fail_check("a data line not preceded by a blank line", cut(s.body.substr(at > 80 ? at - 80 : 0, 160)));
    at += 1;
  }
  return "each event `data: {...}\\n\\n`";
}

std::string done(Probe& p) {
  Stream s = chat_stream(p, json::object(), false);
  require(s.done, "the last event is not data: [DONE]");
  require(s.body.ends_with("data: [DONE]\n\n"), "bytes after data: [DONE]", cut(s.body.substr(s.body.rfind("[DONE]"))));
  return "data: [DONE] last";
}

std::string chunk_objects(Probe& p) {
  Stream s = chat_stream(p);
  for (std::size_t i = 0; i + 1 < s.data.size(); ++i) {
    json j = json::parse(s.data[i], nullptr, false);
    if (!j.is_object()) fail_check(fmt::format("event {} is not a JSON object", i), cut(s.data[i]));
    if (j.contains("error")) fail_check(fmt::format("event {} is an error", i), cut(s.data[i]));
    if (j.value("object", "") != "chat.completion.chunk")
      fail_check(fmt::format("event {}: object is not \"chat.completion.chunk\"", i), cut(s.data[i]));
  }
  return fmt::format("{} chunks", s.chunks.size());
}

std::string first_chunk_role(Probe& p) {
  Stream s = chat_stream(p);
  const json& c = s.chunks.front();
  require(c.contains("choices") && c["choices"].is_array() && !c["choices"].empty(), "the first chunk has no choice",
          cut(s.data.front()));
  const json& delta = c["choices"][0].value("delta", json::object());
  require(delta.is_object() && delta.value("role", "") == "assistant", "the first chunk's delta has no role \"assistant\"");
  return "delta.role assistant first";
}

// OpenAI's first chunk is {"role":"assistant","content":""} (and a refusal: null): a client that
// concatenates delta.content gets a string from the start.
std::string role_chunk_content(Probe& p) {
  Stream s = chat_stream(p);
  const json& delta = s.chunks.front()["choices"][0]["delta"];
  if (!delta.contains("content")) return "role chunk without content";
  require(delta["content"].is_string(), fmt::format("the role chunk's delta.content is {} (OpenAI sends \"\")", delta["content"].dump()),
          cut(s.data.front()));
  return "content \"\"";
}

std::string one_id(Probe& p) {
  Stream s = chat_stream(p, {{"stream_options", {{"include_usage", true}}}});
  const json id = s.chunks.front().value("id", json());
  require(id.is_string() && !id.get<std::string>().empty(), "the first chunk has no id");
  for (const json& c : s.chunks)
    if (c.value("id", json()) != id) fail_check("chunks with different ids", cut(c.dump()));
  return id.get<std::string>();
}

std::string one_created(Probe& p) {
  Stream s = chat_stream(p, {{"stream_options", {{"include_usage", true}}}});
  const json created = s.chunks.front().value("created", json());
  require(created.is_number_integer(), "the first chunk has no integer created");
  for (const json& c : s.chunks) {
    if (c.value("created", json()) != created) fail_check("chunks with different created", cut(c.dump()));
    if (c.value("model", json()) != s.chunks.front().value("model", json())) fail_check("chunks with different model", cut(c.dump()));
  }
  return fmt::format("created {}", created.get<long>());
}

// One finish_reason per choice, on its last chunk; null before.
std::string finish_last(Probe& p) {
  Stream s = chat_stream(p);
  auto chunks = choice_chunks(s);
  int finishes = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const json& item = (*chunks[i])["choices"][0];
    require(item.contains("finish_reason"), "a choice chunk without finish_reason (OpenAI sends null until the end)");
    if (item["finish_reason"].is_null()) continue;
    ++finishes;
    if (i + 1 != chunks.size()) fail_check("content after the finish_reason chunk", cut(chunks[i + 1]->dump()));
  }
  require(finishes == 1, fmt::format("{} chunks with a finish_reason (expected 1)", finishes));
  return "one finish_reason, last";
}

std::string matches_nonstream(Probe& p) {
  Stream s = chat_stream(p, {{"max_tokens", 16}});
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 16}, {"temperature", 0}}));
  const json& c = first_choice(a);
  const std::string whole = c["message"].value("content", "");
  if (s.text() != whole)
    fail_check("the streamed text differs from the same request not streamed (temperature 0)",
               cut("stream: " + s.text() + " | whole: " + whole));
  return fmt::format("{} bytes equal", whole.size());
}

std::string no_usage_by_default(Probe& p) {
  Stream s = chat_stream(p);
  for (const json& c : s.chunks)
    if (c.contains("usage") && !c["usage"].is_null())
      fail_check("usage sent without stream_options.include_usage", cut(c.dump()));
  return "no usage";
}

std::string include_usage(Probe& p) {
  Stream s = chat_stream(p, {{"stream_options", {{"include_usage", true}}}});
  const json& last = s.chunks.back();
  require(last.contains("choices") && last["choices"].is_array() && last["choices"].empty(),
          "the last chunk's choices is not [] (OpenAI sends usage in a chunk of its own)", cut(last.dump()));
  require(last.contains("usage"), "the last chunk has no usage", cut(last.dump()));
  require_usage(last["usage"], "the last chunk");
  return fmt::format("{} completion tokens in the last chunk", last["usage"]["completion_tokens"].get<long>());
}

std::string usage_null_before(Probe& p) {
  Stream s = chat_stream(p, {{"stream_options", {{"include_usage", true}}}});
  for (std::size_t i = 0; i + 1 < s.chunks.size(); ++i)
    if (!s.chunks[i].contains("usage") || !s.chunks[i]["usage"].is_null())
      fail_check(fmt::format("chunk {} does not carry \"usage\": null (OpenAI: every chunk but the last)", i), cut(s.chunks[i].dump()));
  return "usage: null before the last";
}

std::string completions_stream(Probe& p) {
  Stream s = completion_stream(p);
  require(s.header("content-type").starts_with("text/event-stream"), "Content-Type is not text/event-stream");
  require(s.done && s.body.ends_with("data: [DONE]\n\n"), "the stream does not end with data: [DONE]");
  const json id = s.chunks.front().value("id", json());
  int finishes = 0;
  for (const json& c : s.chunks) {
    if (c.value("object", "") != "text_completion") fail_check("a chunk whose object is not \"text_completion\"", cut(c.dump()));
    if (c.value("id", json()) != id) fail_check("chunks with different ids", cut(c.dump()));
    for (const json& item : c.value("choices", json::array()))
      if (item.contains("finish_reason") && !item["finish_reason"].is_null()) ++finishes;
  }
  require(finishes == 1, fmt::format("{} chunks with a finish_reason (expected 1)", finishes));
  Answer a = p.post("/v1/completions", p.completion({{"max_tokens", 8}, {"temperature", 0}}));
  const std::string whole = first_choice(a).value("text", "");
  if (s.text() != whole) fail_check("the streamed text differs from the same request not streamed", cut(s.text() + " | " + whole));
  return fmt::format("{} chunks", s.chunks.size());
}

std::string completions_include_usage(Probe& p) {
  Stream s = completion_stream(p, {{"stream_options", {{"include_usage", true}}}});
  const json& last = s.chunks.back();
  require(last.contains("choices") && last["choices"].is_array() && last["choices"].empty(),
          "the last chunk's choices is not [] (OpenAI sends usage in a chunk of its own)", cut(last.dump()));
  require(last.contains("usage"), "the last chunk has no usage", cut(last.dump()));
  require_usage(last["usage"], "the last chunk");
  Stream plain = completion_stream(p);
  for (const json& c : plain.chunks)
    if (c.contains("usage") && !c["usage"].is_null()) fail_check("usage sent without stream_options.include_usage", cut(c.dump()));
  return "usage in a chunk of its own, only when asked";
}

}  // namespace

void add_stream_checks(std::vector<Check>& checks) {
  checks.push_back({"stream.content_type", "a stream is text/event-stream", content_type});
  checks.push_back({"stream.data_lines", "every line is `data: ...` (or an SSE comment)", data_lines});
  checks.push_back({"stream.separators", "events end with a blank line, \\n only", separators});
  checks.push_back({"stream.done", "the stream ends with data: [DONE] and nothing after", done});
  checks.push_back({"stream.chunk_objects", "every event before [DONE] is a chat.completion.chunk object", chunk_objects});
  checks.push_back({"stream.first_chunk_role", "the first chunk's delta has role assistant", first_chunk_role});
  checks.push_back({"stream.role_chunk_content", "the role chunk's delta.content is a string (OpenAI: \"\")", role_chunk_content});
  checks.push_back({"stream.one_id", "every chunk has the same id", one_id});
  checks.push_back({"stream.one_created", "every chunk has the same created and model", one_created});
  checks.push_back({"stream.finish_last", "finish_reason null until one last chunk per choice", finish_last});
  checks.push_back({"stream.matches_nonstream", "temperature 0: the streamed text equals the non-streamed one", matches_nonstream});
  checks.push_back({"stream.no_usage_by_default", "without stream_options.include_usage no chunk carries usage", no_usage_by_default});
  checks.push_back({"stream.include_usage", "include_usage: a last chunk with choices [] and usage", include_usage});
  checks.push_back({"stream.usage_null_before", "include_usage: every other chunk has usage: null", usage_null_before});
  checks.push_back({"completions.stream", "/v1/completions stream: text_completion chunks, one id, one finish, [DONE], same text", completions_stream});
  checks.push_back({"completions.include_usage", "/v1/completions stream: usage in a last chunk with choices [], only when asked", completions_include_usage});
}

}  // namespace inferlab::lab::conform
