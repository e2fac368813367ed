"""Ranking tools by a query (runner.tools.ranking): BM25 over names and descriptions, exact-name
and prefix boosts, deterministic ties."""

from __future__ import annotations

from runner.tools.ranking import Document, ToolIndex, stem, words
from runner.tools.search import one_line, remember_found

TOOLS = [
    Document("github__create_issue", "Create a new issue in a repository.", ("create_issue",)),
    Document("github__list_issues", "List the issues of a repository, newest first.", ("list_issues",)),
    Document("github__get_pull_request", "Fetch one pull request with its review comments.",
             ("get_pull_request",)),
    Document("payments__convert_currency", "Convert an amount of money from one currency to another.",
             ("convert_currency",)),
    Document("weather__forecast", "The weather forecast for a city, hour by hour.", ("forecast",)),
    Document("files__read_file", "Read a text file and answer with its contents.", ("read_file",)),
    Document("files__calculateChecksum", "SHA-256 of a file.", ("calculateChecksum",)),
    Document("notes__issue_tracker_url", "The address of the issue tracker.", ("issue_tracker_url",)),
]


def names(found: list[Document]) -> list[str]:
    return [document.name for document in found]


def test_names_split_at_underscores_camel_case_and_digits_and_are_stemmed() -> None:
    assert words("github__createIssue") == ["github", "create", "issue"]
    assert words("HTTPRequest v2list") == ["http", "request", "v", "2", "list"]
    assert words("the issues of a repository") == ["issue", "repository"]
    assert [stem(word) for word in ("queries", "boxes", "status", "running", "tagged")] == [
        "query", "box", "status", "runn", "tagg"]


def test_a_query_in_words_finds_the_tool_whose_description_says_it() -> None:
    index = ToolIndex(TOOLS)
    assert names(index.search("convert money between currencies", 3))[0] == "payments__convert_currency"
    assert names(index.search("weather tomorrow in Paris", 3))[0] == "weather__forecast"


def test_words_in_the_name_count_more_than_words_in_the_description() -> None:
    index = ToolIndex([Document("a__forecast", "Temperature for tomorrow."),
                       Document("b__temperature", "Forecast of the weather.")])
    assert names(index.search("forecast", 2)) == ["a__forecast", "b__temperature"]
    assert names(index.search("temperature", 2)) == ["b__temperature", "a__forecast"]
    assert names(ToolIndex(TOOLS).search("create issue", 3))[0] == "github__create_issue"


def test_an_exact_name_wins_whatever_the_words_say() -> None:
    index = ToolIndex(TOOLS)
    assert names(index.search("github__list_issues", 1)) == ["github__list_issues"]
    assert names(index.search("read_file", 1)) == ["files__read_file"]  # the server's own name
    assert names(index.search("READ_FILE", 1)) == ["files__read_file"]


def test_a_name_prefix_finds_the_tools_it_begins() -> None:
    index = ToolIndex(TOOLS)
    assert set(names(index.search("github__", 5))) == {
        "github__create_issue", "github__list_issues", "github__get_pull_request"}
    assert names(index.search("get_pull", 1)) == ["github__get_pull_request"]


def test_a_word_no_tool_has_is_read_as_the_beginning_of_words() -> None:
    index = ToolIndex(TOOLS)
    assert names(index.search("calc", 1)) == ["files__calculateChecksum"]
    assert names(index.search("repo", 2)) == ["github__create_issue", "github__list_issues"]
    assert index.search("ca", 5) == []  # too short to be a prefix


def test_nothing_matches_unknown_words_and_limit_bounds_the_answer() -> None:
    index = ToolIndex(TOOLS)
    assert index.search("quantum teleportation", 5) == []
    assert index.search("", 5) == []
    assert len(index.search("a the issue of", 1)) == 1


def test_equal_scores_keep_the_catalog_order() -> None:
    twins = [Document(f"s__tool_{n}", "Same words here.") for n in range(5)]
    assert names(ToolIndex(twins).search("same words", 5)) == [f"s__tool_{n}" for n in range(5)]


def test_ranking_ten_thousand_tools_takes_one_query_at_a_time() -> None:
    documents = [Document(f"s{n % 20:02d}__tool_{n}", f"Does thing number {n} for group {n % 7}.")
                 for n in range(10_000)]
    documents[4242] = Document("s02__convert_currency", "Convert money between currencies.")
    index = ToolIndex(documents)
    assert names(index.search("convert currencies", 1)) == ["s02__convert_currency"]
    assert names(index.search("tool_9999", 1)) == ["s19__tool_9999"]


def test_found_names_are_kept_once_in_the_order_last_found() -> None:
    assert remember_found(["a", "b", "c"], ["b", "d", "d"]) == ["a", "c", "b", "d"]
    assert remember_found(None, ["x"]) == ["x"]
    assert remember_found(["x"], []) == ["x"]


def test_one_line_is_the_first_non_empty_line_cut_to_its_limit() -> None:
    assert one_line("\n  First line.\nSecond.") == "First line."
    assert one_line("x" * 20, limit=10) == "x" * 9 + "…"
    assert one_line("") == ""
