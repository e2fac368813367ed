"""A server that asks the client for things, in both protocol eras.

Tools: book (a form: date required, seats with a default), visit (URL mode; on 2025-11-25 the
server then says the visit is complete), sign_in (URL mode through ``ctx.elicit_url`` with a fresh
``uuid4`` id, and in the URL's query, at every call, as the SDK's examples do; 2025-11-25), nag
(asks to visit a page again after every answer, a fresh id each time, never ending; with
``new_page`` a page of its own each time; 2025-11-25),
portal (error -32042: a URL to visit before the call is
made again; the visit completes ``delay`` seconds after the first call), roots (the client's
roots), summarize (sampling), forecast (sampling with a tool, 2025-11-25), slow (progress every
``interval`` seconds), levels (one log message per level), flood (``count`` log messages, then an
answer), elicitations_seen (the answers it got).

On 2025-11-25 sessions the questions are ``elicitation/create`` / ``roots/list`` requests; on
2026-07-28 ones the tool returns a result asking for input and reads the answers when the client
retries the call.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning, UrlElicitationRequiredError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

BOOKING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "date": {"type": "string", "description": "Day of the booking"},
        "seats": {"type": "integer", "minimum": 1, "default": 2},
    },
    "required": ["date"],
}


WEATHER_TOOL = types.Tool(
    name="get.weather", description="The weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def build(name: str = "asking") -> MCPServer:
    server = MCPServer(name)
    answers: list[str] = []

    async def ask(
        ctx: Context, request: types.ElicitRequest
    ) -> types.ElicitResult | types.InputRequiredResult:
        """The answer to ``request``: a request to the client (2025) or a result asking (2026)."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            responses = ctx.input_responses or {}
            answer = responses.get("question")
            if answer is None:
                return types.InputRequiredResult(input_requests={"question": request})
            return types.ElicitResult.model_validate(answer.model_dump(by_alias=True))
        return await ctx.request_context.session.send_request(request, types.ElicitResult)

    @server.tool()
    async def book(ctx: Context) -> Any:
        """Book a table: asks for the date and the number of seats."""
        answer = await ask(ctx, types.ElicitRequest(params=types.ElicitRequestFormParams(
            message="Which day, for how many?", requested_schema=BOOKING_SCHEMA,
        )))
        if isinstance(answer, types.InputRequiredResult):
            return answer
        answers.append(f"{answer.action} {answer.content}")
        if answer.action != "accept" or answer.content is None:
            return f"not booked: the user chose {answer.action}"
        return f"booked {answer.content['date']} for {answer.content['seats']}"

    @server.tool()
    async def visit(ctx: Context) -> Any:
        """Ask the user to visit a page (URL mode)."""
        answer = await ask(ctx, types.ElicitRequest(params=types.ElicitRequestURLParams(
            message="Sign in to the calendar", url="https://calendar.example/sign-in",
            elicitation_id="sign-in-1",
        )))
        if isinstance(answer, types.InputRequiredResult):
            return answer
        answers.append(answer.action)
        if answer.action == "accept" and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            # The user went through the page (out of band): the server says so.
            await ctx.request_context.session.send_elicit_complete("sign-in-1")
        return f"visit: {answer.action}"

    @server.tool()
    async def sign_in(ctx: Context) -> str:
        """Ask the user to sign in at a page whose every request has a new id (URL mode)."""
        elicitation_id = str(uuid.uuid4())
        answer = await ctx.elicit_url(
            message="Sign in to the mailbox", url=f"https://mail.example/sign-in?session={elicitation_id}",
            elicitation_id=elicitation_id,
        )
        answers.append(f"sign_in {answer.action}")
        return f"sign-in: {answer.action}"

    @server.tool()
    async def nag(ctx: Context, new_page: bool = False) -> str:
        """Ask the user to visit a page, again after every answer (a new id each time, in the
        query; with ``new_page``, in the path: another page each time)."""
        while True:
            elicitation_id = str(uuid.uuid4())
            page = f"again/{elicitation_id}" if new_page else f"again?id={elicitation_id}"
            answer = await ctx.elicit_url(
                message="Visit once more", url=f"https://nag.example/{page}", elicitation_id=elicitation_id,
            )
            answers.append(f"nag {answer.action}")

    portal_calls: list[int] = []
    connected = anyio.Event()

    async def connect_later(session: Any, delay: float) -> None:
        await anyio.sleep(delay)
        connected.set()
        await session.send_elicit_complete("connect-1")

    @server.tool()
    async def portal(ctx: Context, delay: float = 0.3) -> str:
        """Needs the user to connect an account at a URL first (error -32042); the account is
        connected ``delay`` seconds after the first call asked (2025-11-25)."""
        portal_calls.append(1)
        if not connected.is_set():
            if len(portal_calls) == 1:
                session = ctx.request_context.session
                asyncio.get_running_loop().create_task(connect_later(session, delay))
            raise UrlElicitationRequiredError([types.ElicitRequestURLParams(
                message="Connect your account", url="https://portal.example/connect",
                elicitation_id="connect-1",
            )])
        return f"connected after {len(portal_calls)} calls"

    steps_calls: list[int] = []

    async def complete_later(session: Any, elicitation_id: str) -> None:
        await anyio.sleep(0.1)
        await session.send_elicit_complete(elicitation_id)

    @server.tool()
    async def steps(ctx: Context) -> str:
        """Needs two URL visits, one per call: step-1, then step-2 (error -32042, 2025-11-25)."""
        steps_calls.append(1)
        if len(steps_calls) <= 2:
            step = f"step-{len(steps_calls)}"
            session = ctx.request_context.session
            asyncio.get_running_loop().create_task(complete_later(session, step))
            raise UrlElicitationRequiredError([types.ElicitRequestURLParams(
                message=f"Go through {step}", url=f"https://portal.example/{step}", elicitation_id=step,
            )])
        return f"through both steps after {len(steps_calls)} calls"

    @server.tool()
    async def roots(ctx: Context) -> Any:
        """The client's roots, one URI a line."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answer = (ctx.input_responses or {}).get("roots")
            if answer is None:
                return types.InputRequiredResult(input_requests={"roots": types.ListRootsRequest()})
            listed = types.ListRootsResult.model_validate(answer.model_dump(by_alias=True))
        else:
            with warnings.catch_warnings():  # deprecated at 2026-07-28, current in 2025-11-25
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                listed = await ctx.request_context.session.list_roots()
        return "\n".join(str(root.uri) for root in listed.roots) or "no roots"

    @server.tool()
    async def summarize(text: str, ctx: Context) -> Any:
        """Ask the client's model for a summary of ``text`` (sampling)."""
        request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
            system_prompt="Summarize in five words.", max_tokens=50, stop_sequences=["END"],
        ))
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answer = (ctx.input_responses or {}).get("summary")
            if answer is None:
                return types.InputRequiredResult(input_requests={"summary": request})
            completion = types.CreateMessageResult.model_validate(answer.model_dump(by_alias=True))
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                session = ctx.request_context.session
                completion = await session.send_request(request, types.CreateMessageResult)
        return f"summary: {completion.content.text}"

    @server.tool()
    async def forecast(city: str, ctx: Context, choice: str = "auto") -> str:
        """Ask the client's model for a forecast of ``city``, offering it the tool get.weather (run
        here, its result sent back in the next request); ``choice`` is the request's toolChoice."""
        question = types.TextContent(text=f"Forecast for {city}?")
        messages = [types.SamplingMessage(role="user", content=question)]
        session = ctx.request_context.session
        for _ in range(3):
            request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(
                messages=messages, max_tokens=100, tools=[WEATHER_TOOL],
                tool_choice=types.ToolChoice(mode=choice),
            ))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                result = await session.send_request(request, types.CreateMessageResultWithTools)
            uses = [block for block in result.content_as_list if isinstance(block, types.ToolUseContent)]
            if result.stop_reason != "toolUse" or not uses:
                blocks = result.content_as_list
                texts = [block.text for block in blocks if isinstance(block, types.TextContent)]
                return f"forecast: {' '.join(texts)}"
            messages.append(types.SamplingMessage(role="assistant", content=result.content_as_list))
            messages.append(types.SamplingMessage(role="user", content=[
                types.ToolResultContent(tool_use_id=use.id,
                                        content=[types.TextContent(text=f"sunny in {use.input['city']}")])
                for use in uses
            ]))
        return "forecast: the model kept calling tools"

    @server.tool()
    async def levels(ctx: Context) -> str:
        """One log message at each of debug, info, warning and error (logger 'asking.levels')."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            for level in ("debug", "info", "warning", "error"):
                await ctx.log(level, f"a {level} message", logger_name="asking.levels")
        return "logged"

    @server.tool()
    async def flood(count: int, ctx: Context) -> str:
        """``count`` info log messages, then the answer."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            for index in range(count):
                await ctx.log("info", f"message {index} " + "x" * 200)
        return f"flooded {count}"

    @server.tool()
    async def slow(steps: int, interval: float, ctx: Context) -> str:
        """``steps`` progress notifications ``interval`` seconds apart, then the answer."""
        for step in range(1, steps + 1):
            await anyio.sleep(interval)
            await ctx.report_progress(step, steps, f"step {step}")
        return f"slow done {steps}"

    @server.tool()
    def elicitations_seen() -> list[str]:
        """The answers the server got so far."""
        return answers

    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
