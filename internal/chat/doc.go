// Package chat turns an OpenAI-style conversation into the prompt text a model was trained on, by
// rendering the model's Jinja chat template (GGUF key tokenizer.chat_template) the way Hugging Face
// transformers' apply_chat_template does.
//
// # Rendering environment
//
// A template is compiled once (NewTemplate) and rendered many times, concurrently if need be. Each
// render sees these variables, as in transformers:
//
//   - messages: the conversation; each message is a dict with role and content, plus name,
//     tool_calls, tool_call_id and reasoning_content when they are set (absent keys stay undefined,
//     which templates test with "is defined" or "in message").
//   - add_generation_prompt: whether to open the assistant turn.
//   - bos_token, eos_token: the tokenizer's special token texts.
//   - tools: the tool (function) definitions, or none when the request has none.
//   - any extra variables of the request (chat_template_kwargs, e.g. enable_thinking).
//
// and these functions:
//
//   - raise_exception(msg): aborts the render; Render returns an *Error whose text is
//     "chat template error: <msg>".
//   - strftime_now(fmt): the current local time formatted with Python strftime directives.
//
// The tojson filter behaves as transformers' override of it (json.dumps with ensure_ascii=False,
// keys in insertion order, Python float formatting, indent/separators/sort_keys honoured), so tool
// definitions render byte for byte as in Python. To keep key order, pass tools and extra variables
// as json.RawMessage (or as Go structs); a map[string]any has no order and renders with sorted keys.
//
// Message content given as parts (Message.Parts) is rendered as a list of {type, text} dicts when
// the template iterates over message content, and otherwise as the text parts joined with "\n"
// (vLLM's "string" content format), since most text-only templates concatenate content as a string.
// Tool call arguments that hold a JSON object are passed to the template as a dict, as vLLM and
// llama.cpp do, because templates such as Qwen2.5's and Llama 3's print them with tojson.
//
// # Default template
//
// A model without a chat template gets ChatML (DefaultSource), the fallback of llama.cpp and
// mistral.rs:
//
//	<|im_start|>system
//	You are a helpful assistant.<|im_end|>
//	<|im_start|>user
//	Hello<|im_end|>
//	<|im_start|>assistant
//
// that is, every message as "<|im_start|>" + role + "\n" + content + "<|im_end|>\n", and
// "<|im_start|>assistant\n" when a generation prompt is asked for. No system message is added.
//
// # Limits
//
// The engine has no limits of its own, so a render is bounded here (limits.go): macro calls nest
// at most MaxMacroDepth deep (the preprocessor wraps every macro body in calls that count the
// depth), range is replaced by a version that refuses more than MaxRangeItems items per call and
// MaxRangeTotal per render, and a prompt over MaxOutput bytes is refused. What can grow without a
// loop's help is bounded as it is made (operators.go): the preprocessor rewrites the binary
// operators *, + and ~ into calls that refuse a string repetition or a concatenation larger than
// MaxOutput (a list longer than MaxRangeTotal items), points the filters join, replace and indent
// and the string methods replace and format at versions that check the size of their result
// first, and wraps every output tag in a call that counts what the render writes (MaxWritten). Repetitions may make MaxOutput bytes per render in
// all, and concatenations, repetitions and those filters together MaxBuilt. Passing a limit is an
// *Error with Limit set. NewTemplate refuses a range with literal arguments over the limit, a macro
// parameter default that calls a macro, and a template that passes a limit when rendering a sample
// conversation. Python Jinja would raise RecursionError or MemoryError in these cases.
//
// # Known differences from Python Jinja
//
// The underlying engine (github.com/ardanlabs/jinja) is lenient where Jinja2 raises: an attribute
// of an undefined value renders empty, and printing none renders "" rather than "None". Python's
// "%" string formatting is not supported. The templates of the common model families do not
// depend on either.
package chat
