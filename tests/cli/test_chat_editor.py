"""The chat's line editor in a pseudo-terminal: history across runs, Tab completion, multi-line
messages, the status line, streamed answers kept above it, output printed above a half-typed line,
Ctrl-C at a question, media saved from a tool; and plain lines without escape codes when stdin is
not a terminal."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pexpect
import pytest
from builders import (
    ask_the_sub_agent_to_delete_a_note,
    asking_agent,
    chat_in_a_terminal,
    copy_bundled_agent,
    main_agent_serving_the_bundled_one,
    server,
    write_manifest,
)
from fixtures.openai_stub import OpenAIStub, StubReply
from mcp_servers.loopback import serve_app

from runner.cli.media import MediaFolder, inline_preview
from runner.cli.status import SPINNER

UP = "\x1b[A"
ALT_ENTER = "\x1b\r"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
STYLE = r"(?:\x1b\[[\d;]*m)*"
GAP = rf"{STYLE}(?: |\x1b\[\d*C){STYLE}"  # a space, or the cursor moved over one
TERMINAL = {**os.environ, "TERM": "xterm-256color"}
STATUS_REDRAWS = 5  # spinner frames: longer than prompt_toolkit bundles writes above the status line


def drawn(text: str) -> str:
    """A pattern for ``text`` as the editor draws it: a space may be a cursor move over a blank."""
    return GAP.join(re.escape(part) for part in text.split(" "))


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    return copy_bundled_agent(tmp_path)


def chat(folder: Path, *options: str, env: dict[str, str] | None = None) -> Any:
    """The chat in a pseudo-terminal of a known kind (xterm unless ``env`` says otherwise)."""
    return chat_in_a_terminal(folder, *options, env=env or TERMINAL)


def test_up_recalls_a_message_sent_in_an_earlier_run(agent_dir: Path) -> None:
    with chat(agent_dir) as first:
        first.sendline('notes__calculate {"expression": "6*7"}')
        first.expect("returned: 42")
        first.expect("> ")
    assert (agent_dir / ".mcp-run" / "chat_history").is_file()
    with chat(agent_dir) as second:
        second.send(UP + UP + "\r")  # the last line was /exit
        second.expect("returned: 42")
        second.expect("> ")


def test_tab_completes_a_chat_command_and_a_tool_name(agent_dir: Path) -> None:
    with chat(agent_dir) as session:
        session.send("/to\t")
        session.expect("ols")  # drawn after what was typed
        session.send("\r")
        session.expect("notes__delete_note")
        session.expect("> ")
        session.send("/call notes__calc\t")
        session.expect("ulate")
        session.send(' {"expression": "2*5"}\r')
        session.expect("→ notes__calculate")
        session.expect(r"\b10\b")
        session.expect("> ")
        session.send("/summary st\t")  # a prompt command's argument name
        session.expect("yle=")
        session.send("short\r")
        session.expect("> ")


def test_tab_then_enter_typed_at_once_in_a_new_chat_sends_the_completed_command(agent_dir: Path) -> None:
    with chat(agent_dir) as session:
        session.send("/to\t\r")  # no waiting between the keys: the first Tab of the chat
        assert session.expect(["unknown command", "notes__delete_note"]) == 1
        session.expect("> ")
        session.send("notes__calc\t" + ' {"expression": "2*6"}\r')  # a tool at the start of a line
        session.expect("→ notes__calculate")
        session.expect(r"\b12\b")
        session.expect("> ")


def test_tab_completes_the_choices_of_a_served_sub_agents_question(tmp_path: Path) -> None:
    main_agent_serving_the_bundled_one(tmp_path)
    with chat(tmp_path) as session:
        ask_the_sub_agent_to_delete_a_note(session)
        session.send("ye\t\r")  # "yes": the tool runs, and no reason is asked
        session.expect("no note titled 'ghost'")
        session.expect("> ")


def test_a_message_of_several_lines_is_sent_as_one(agent_dir: Path) -> None:
    with chat(agent_dir) as session:
        # A line ending in a backslash continues; so does Alt-Enter; pasted lines stay together.
        session.send('notes__calculate {"expression":\\\r')
        session.send('"6*7"}\r')
        session.expect("returned: 42")
        session.expect("> ")
        session.send('notes__calculate {"expression":' + ALT_ENTER + '"3*3"}\r')
        session.expect("returned: 9")
        session.expect("> ")
        session.send(PASTE_START + 'notes__calculate {"expression":\r"2*2"}' + PASTE_END + "\r")
        session.expect("returned: 4")
        session.expect("> ")


def test_ctrl_c_at_an_approval_then_a_command_is_answered_at_once(agent_dir: Path) -> None:
    with chat(agent_dir) as session:
        session.sendline('notes__delete_note {"title": "ghost"}')
        session.expect(r"approve\? \[y\]es / \[n\]o / \[e\]dit: ")
        session.sendcontrol("c")
        session.expect("turn interrupted")
        session.expect("> ")
        session.sendline("/thread")
        session.expect(r"thread [0-9a-f]{12}\r\n", timeout=10)  # no abandoned reader took the line
        session.expect("> ")


def test_a_reload_line_is_printed_above_a_half_typed_line_which_survives(agent_dir: Path) -> None:
    with chat(agent_dir, "--watch") as session:
        session.send('notes__calculate {"expression": ')
        session.expect(drawn('notes__calculate {"expression":'))
        manifest = agent_dir / "agent.yaml"
        manifest.write_text(manifest.read_text().replace("tone: concise", "tone: friendly"))
        session.expect("reloaded in")
        session.expect(">" + GAP + drawn('notes__calculate {"expression":'))  # redrawn under the line
        session.send('"2+3"}\r')
        session.expect("returned: 5")
        session.expect("> ")


def test_the_status_line_names_the_agent_and_servers_and_shows_a_running_calls_progress(
    tmp_path: Path,
) -> None:
    asking_agent(tmp_path, legacy=True)
    with chat(tmp_path) as session:
        session.expect(r"asking · offline · thread [0-9a-f]{12} · servers 1/1 up")
        session.sendline('asking__slow {"steps": 2, "interval": 1.5}')
        session.expect(r"calling asking__slow")
        # The status line is redrawn in place: unchanged cells are skipped with cursor moves. The
        # printed progress line reads "asking__slow: 1/2 …".
        session.expect(rf"(?<!: )1/2{GAP}\(50%\){GAP}step{GAP}1")
        session.expect("slow done 2")
        session.expect("> ")


def test_an_image_from_a_tool_is_saved_and_its_path_printed(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, name="pictures", model="offline")
    with chat(tmp_path) as session:
        session.sendline("demo__image")
        session.expect(r"saved image/png from demo__image: (/[^\s\x1b]+\.png)")
        path = Path(session.match.group(1))
        session.expect("> ")
        session.sendline("/media")
        session.expect(re.escape(str(path)))
        session.expect("> ")
    assert path.read_bytes().startswith(b"\x89PNG")
    assert path.parent.parent == (tmp_path / ".mcp-run" / "media").resolve()
    assert path.name == "001-demo__image.png"


def test_a_one_shot_run_prints_the_saved_media_path_on_stderr(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, name="pictures", model="offline")
    result = subprocess.run([sys.executable, "-m", "runner", "agent.yaml", "-p", "demo__image"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("saved image/png")]
    assert Path(line.split(": ", 1)[1]).read_bytes().startswith(b"\x89PNG")


def test_piped_input_is_read_as_plain_lines_without_escape_codes(agent_dir: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "runner", "agent.yaml"], cwd=agent_dir, env=TERMINAL,
                            input='notes__calculate {"expression": "6*7"}\n/thread\n', capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "returned: 42" in result.stdout and "\x1b" not in result.stdout + result.stderr
    assert not (agent_dir / ".mcp-run" / "chat_history").exists()


def test_a_dumb_terminal_gets_plain_lines(agent_dir: Path) -> None:
    with chat(agent_dir, env={**os.environ, "TERM": "dumb"}) as session:
        session.sendline('notes__calculate {"expression": "6*7"}')
        session.expect("returned: 42")
        session.expect("> ")
        shown = session.before
    assert "\x1b" not in shown
    assert not (agent_dir / ".mcp-run" / "chat_history").exists()


def test_a_line_typed_while_a_turn_runs_is_sent_after_it(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, name="ahead", model="offline", checkpointer="memory")
    with chat(tmp_path) as session:
        session.sendline('demo__sleep {"seconds": 2}')
        session.expect("→ demo__sleep")
        session.sendline('demo__echo {"text": "typed ahead"}')
        session.expect("demo__sleep returned")
        session.expect("returned: typed ahead")
        session.expect("> ")


def test_the_status_line_shows_a_crashed_server_restarting_and_its_tools_work_again(tmp_path: Path) -> None:
    import psutil

    write_manifest(tmp_path, {"demo": server("demo")}, name="crashy", model="offline", checkpointer="memory")
    with chat(tmp_path) as session:
        session.expect("servers 1/1 up")
        [demo] = [child for child in psutil.Process(session.pid).children(recursive=True)
                  if any("demo.py" in part for part in child.cmdline())]
        demo.kill()
        session.expect(r"restarting\)")  # "servers 0/1 up (demo restarting)", redrawn in place
        session.sendline('demo__echo {"text": "back"}')
        session.expect("returned: back")
        session.expect("> ")


def test_tab_completes_a_thread_id_the_checkpointer_holds(agent_dir: Path) -> None:
    earlier = subprocess.run([sys.executable, "-m", "runner", "agent.yaml", "-p", "hi", "--thread", "older1"],
                             cwd=agent_dir, capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
    assert earlier.returncode == 0, earlier.stderr
    with chat(agent_dir, "--thread", "t2") as session:
        session.send("/thread ol\t")
        session.expect("der1")
        session.send("\r")
        session.expect(r"thread older1\r\n")
        session.expect("> ")


def test_images_are_previewed_inline_only_on_terminals_known_to_show_them(tmp_path: Path) -> None:
    png = tmp_path / "001-demo__image.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16)
    event = {"type": "media", "tool": "demo__image", "id": "c1", "mime_type": "image/png", "path": str(png)}
    assert inline_preview(event, {"TERM": "xterm-256color"}) is None
    assert inline_preview(event, {"TERM": "xterm-256color", "TERM_PROGRAM": "Apple_Terminal"}) is None
    assert inline_preview({**event, "mime_type": "audio/wav"}, {"TERM_PROGRAM": "iTerm.app"}) is None
    assert inline_preview(event, {"TERM_PROGRAM": "iTerm.app"}).startswith("\x1b]1337;File=inline=1;")
    assert inline_preview(event, {"TERM": "xterm-kitty"}).startswith("\x1b_Gf=100,a=T,m=0;")


def test_media_files_are_numbered_per_thread_and_named_by_tool(tmp_path: Path) -> None:
    folder = MediaFolder(tmp_path)
    image = {"type": "image", "base64": base64.b64encode(b"\x89PNG").decode(), "mime_type": "image/png"}
    audio = {"type": "audio", "base64": base64.b64encode(b"RIFF").decode(), "mime_type": "audio/wav"}
    document = {"type": "file", "base64": base64.b64encode(b"%PDF").decode(), "mime_type": "application/pdf",
                "extras": {"filename": "report.pdf"}}
    folder.save("t1", "demo__image", "c1", [image, {"type": "text", "text": "not media"}])
    folder.save("t1", "voice/speak", "c2", [audio, document])
    folder.save("t2", "demo__image", "c3", [image])
    assert [path.name for path in folder.files("t1")] == [
        "001-demo__image.png", "002-voice_speak.wav", "003-voice_speak.pdf"]
    assert [path.name for path in folder.files("t2")] == ["001-demo__image.png"]
    assert (tmp_path / "media" / "t1" / "003-voice_speak.pdf").read_bytes() == b"%PDF"


def test_ctrl_r_then_enter_sends_the_match_and_leaves_search_mode(agent_dir: Path) -> None:
    with chat(agent_dir) as session:
        session.send('notes__calculate {"expression": "5*7"}\r')
        session.expect("returned: 35")
        session.expect("> ")
        session.sendcontrol("r")
        session.send("calc")
        session.expect("5\\*7")
        session.send("\r")
        session.expect("returned: 35")
        session.expect("> ")
        session.send("/thread\r")  # at the prompt again, not in the search field
        session.expect(r"thread [0-9a-f]{12}\r\n", timeout=10)
        session.expect("> ")


def test_ctrl_c_clears_a_half_typed_line_and_the_chat_goes_on(agent_dir: Path) -> None:
    with chat(agent_dir) as session:
        session.send("half typed words")
        session.expect(drawn("half typed words"))
        session.sendcontrol("c")
        session.send('notes__calculate {"expression": "6*6"}\r')
        session.expect("returned: 36")
        session.expect("> ")
    assert session.exitstatus == 0


def test_ctrl_d_typed_while_a_turn_runs_leaves_after_the_turn(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, name="ahead", model="offline", checkpointer="memory")
    session = pexpect.spawn(sys.executable, ["-m", "runner", "agent.yaml"], cwd=str(tmp_path),
                            encoding="utf-8", timeout=60, dimensions=(40, 200), env=TERMINAL)
    try:
        session.expect("> ")
        session.sendline('demo__sleep {"seconds": 2}')
        session.expect("→ demo__sleep")
        session.sendcontrol("d")
        session.expect("demo__sleep returned")
        session.expect(pexpect.EOF)
    finally:
        session.close(force=True)
    assert session.exitstatus == 0


def test_the_completion_menu_shows_more_than_three_rows_in_a_tall_window(agent_dir: Path) -> None:
    session = pexpect.spawn(sys.executable, ["-m", "runner", "agent.yaml"], cwd=str(agent_dir),
                            encoding="utf-8", timeout=60, dimensions=(35, 120), env=TERMINAL)
    try:
        session.expect("> ")
        session.send("/\t")
        for name in ("/help", "/tools", "/prompts", "/agents", "/agent", "/call", "/thread"):
            session.expect(re.escape(name))  # in the menu, in order
        session.send("\x1b")
        session.sendcontrol("u")
        session.send("/exit\r")
        session.expect(pexpect.EOF)
    finally:
        session.close(force=True)


def test_an_approval_says_what_to_answer_and_edit_starts_from_the_current_arguments(agent_dir: Path) -> None:
    with chat(agent_dir) as session:
        session.send('notes__delete_note {"title": "ghost"}\r')
        session.expect(r"approve\? \[y\]es / \[n\]o / \[e\]dit: ")
        session.send("maybe\r")
        session.expect(r"answer y, n or e \(yes, no, or edit the arguments\)")
        session.expect(r"\[e\]dit: ")
        session.send("e\r")
        session.expect("arguments as JSON: ")
        session.expect(drawn('{"title": "ghost"}'))  # the current arguments, ready to edit
        session.send('\x7f\x7f2"}\r')
        session.expect(re.escape('→ notes__delete_note {"title": "ghost2"}'))
        session.expect("> ")



def test_a_streamed_answer_stays_on_screen_ended_by_its_newline_however_it_was_chunked(
    tmp_path: Path,
) -> None:
    # Each answer's text arrives alone (its last chunk without a newline) and the stub holds the
    # rest of the reply while the status line is redrawn (more often than stdout is written above
    # it); the status line and the prompt are drawn from the start of the cursor's line, so the
    # text must come with its newline or be erased.
    finishes = [threading.Event() for _ in range(4)]
    answers = ["alpha", "bravo charlie delta", "first line\nlast line", "after the tool"]
    replies = [StubReply(content, finish_after=finish)
               for content, finish in zip(answers, finishes, strict=True)]
    replies.insert(3, StubReply(tool_calls=[("demo__echo", {"text": "ping"})]))
    try:
        with serve_app(OpenAIStub(replies)) as model_server:
            model = {"id": "openai:gpt-4.1-mini", "base_url": model_server.url("/v1"),
                     "api_key_env": "STUB_KEY"}
            write_manifest(tmp_path, {"demo": server("demo")}, model=model)
            with chat(tmp_path, env={**TERMINAL, "STUB_KEY": "sk-stub"}) as session:
                for answer, finish in zip(answers, finishes, strict=True):
                    session.sendline("go on")
                    session.expect("answering")  # the text was streamed; the reply is not over
                    for _ in range(STATUS_REDRAWS):  # time for the text to be written, alone
                        session.expect(f"[{SPINNER}]")
                    finish.set()
                    last_line = answer.split("\n")[-1]
                    session.expect(re.escape(last_line) + rf" ?{STYLE}\r\n", timeout=20)
                    session.expect("> ")
    finally:
        for finish in finishes:
            finish.set()  # a stream still held lets the model server stop
