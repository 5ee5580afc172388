import sys, json
from openai import OpenAI
c = OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="x")
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
msgs = [{"role": "user", "content": "What's the weather in Paris right now?"}]
for kw in ({}, {"tool_choice": "required"}, {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, {"tool_choice": "none"}):
    r = c.chat.completions.create(model="default", messages=msgs, tools=tools, temperature=0, max_tokens=64, **kw)
    m = r.choices[0].message
    print(kw, r.choices[0].finish_reason, repr(m.content), m.tool_calls)
    # streamed
    calls, content, fin = {}, "", None
    for ch in c.chat.completions.create(model="default", messages=msgs, tools=tools, temperature=0, max_tokens=64, stream=True, **kw):
        if not ch.choices: continue
        d = ch.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            calls.setdefault(tc.index, []).append((tc.function.name, tc.function.arguments))
        fin = ch.choices[0].finish_reason or fin
    print("  stream", fin, repr(content), calls)
r = c.chat.completions.create(model="default", messages=msgs, tools=tools, temperature=0, max_tokens=64)
call = r.choices[0].message.tool_calls[0]
msgs2 = msgs + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 18, "sky": "cloudy"})}]
r2 = c.chat.completions.create(model="default", messages=msgs2, tools=tools, temperature=0, max_tokens=64)
print("after tool:", r2.choices[0].finish_reason, repr(r2.choices[0].message.content))
