// The conversation as a list of turns (a person's message and what answered it), of which only
// those near the visible part are in the page: a thread of hundreds of turns opens with its last
// ones, and turns are rendered as the reader scrolls toward them and dropped once far away. Spacers
// above and below stand for the turns not rendered (at their measured height, or an estimate), so
// the scrollbar spans the whole thread; when turns come or go above the reader's place, the
// view is moved by what they changed, so what the reader looks at stays still.
//
// A turn is {items, node, height, live}: `render(turn)` builds its node from its items (the
// thread's history, or the events it streamed); a live turn (its stream still running) keeps its
// node while out of view, so what streams into it is not lost; `release(node)` is called for a
// node leaving the page (to close what it holds, such as an app's frame).
import { el } from "./dom.js";

export const INITIAL_TURNS = 30;  // turns rendered when a thread opens (its last ones)
const MARGIN = 15;  // turns kept rendered beyond each edge of the visible part
const ESTIMATE = 150;  // pixels a turn never rendered is taken to be tall
const FOLLOW_SLACK = 48;  // pixels from the end within which the view follows what streams

function spacer() {
  return el("li", { className: "spacer", "aria-hidden": "true" });
}

export class Conversation {
  constructor(list, render, release) {
    this.list = list;
    this.render = render;
    this.release = release;
    this.turns = [];
    this.start = 0;  // the rendered turns: [start, end)
    this.end = 0;
    this.above = spacer();
    this.below = spacer();
    this.scheduled = false;
    list.addEventListener("scroll", () => {
      if (this.scheduled) return;
      this.scheduled = true;
      requestAnimationFrame(() => {
        this.scheduled = false;
        this.fit();
      });
    }, { passive: true });
  }

  // No turns: a new thread.
  clear() {
    for (let index = this.start; index < this.end; index += 1) this.drop(this.turns[index]);
    for (const turn of this.turns) if (turn.node) this.release(turn.node);  // live ones out of view
    this.turns = [];
    this.start = this.end = 0;
    this.list.replaceChildren();
  }

  // A thread's turns (each a list of items), its last ones shown.
  load(turns) {
    this.clear();
    this.turns = turns.map((items) => ({ items, node: null, height: null, live: false }));
    if (!this.turns.length) return;
    this.list.replaceChildren(this.above, this.below);
    this.show(Math.max(0, this.turns.length - INITIAL_TURNS), this.turns.length);
    this.toEnd();
  }

  // A new turn starting with `items`, live, shown at the end (the view goes there).
  begin(items) {
    if (!this.turns.length) this.list.replaceChildren(this.above, this.below);
    const shownToEnd = this.end === this.turns.length;
    this.turns.push({ items, node: null, height: null, live: true });
    const count = this.turns.length;
    this.show(shownToEnd ? this.start : Math.max(0, count - INITIAL_TURNS), count);
    this.toEnd();
    return this.turns[count - 1];
  }

  // `turn` (by default the last), live again (an answer resumes it), the end shown; a new one if
  // none. The turn that asked may not be the last: a message refused meanwhile may follow it.
  resume(turn = null) {
    const count = this.turns.length;
    if (!count) return this.begin([]);
    turn = turn && this.turns.includes(turn) ? turn : this.turns[count - 1];
    turn.live = true;
    if (this.end !== count) this.show(Math.max(0, count - INITIAL_TURNS), count);
    if (!turn.node) turn.node = this.render(turn);  // out of view: it streams into its node, kept while live
    this.toEnd();
    return turn;
  }

  // Whether the view is at the end of the conversation (then it follows what streams).
  atEnd() {
    const list = this.list;
    return this.end === this.turns.length && list.scrollHeight - list.scrollTop - list.clientHeight <= FOLLOW_SLACK;
  }

  toEnd() {
    this.list.scrollTop = this.list.scrollHeight;
  }

  // Render the turns [start, end) and only those, the turn the reader looks at kept in place.
  show(start, end) {
    const anchor = this.anchor(start, end);
    for (let index = this.start; index < this.end; index += 1) {
      if (index < start || index >= end) this.drop(this.turns[index]);
    }
    let cursor = this.above;
    for (let index = start; index < end; index += 1) {
      const turn = this.turns[index];
      if (!turn.node) turn.node = this.render(turn);
      if (turn.node.parentNode !== this.list || turn.node.previousSibling !== cursor) cursor.after(turn.node);
      cursor = turn.node;
    }
    this.start = start;
    this.end = end;
    for (let index = start; index < end; index += 1) this.turns[index].height = this.turns[index].node.offsetHeight;
    this.above.style.height = `${this.span(0, start)}px`;  // CSSOM: the policy allows no inline styles
    this.below.style.height = `${this.span(end, this.turns.length)}px`;
    if (anchor) this.list.scrollTop = anchor.turn.node.offsetTop - anchor.offset;
  }

  // The first visible turn rendered now and still after the change, with its place in the view.
  anchor(start, end) {
    const top = this.list.scrollTop;
    for (let index = Math.max(this.start, start); index < Math.min(this.end, end); index += 1) {
      const node = this.turns[index].node;
      if (node.offsetTop + node.offsetHeight > top) return { turn: this.turns[index], offset: node.offsetTop - top };
    }
    return null;
  }

  drop(turn) {
    if (!turn.node) return;
    turn.height = turn.node.offsetHeight || turn.height;
    turn.node.remove();
    if (!turn.live) {
      this.release(turn.node);
      turn.node = null;
    }
  }

  span(from, to) {
    let total = 0;
    for (let index = from; index < to; index += 1) total += this.turns[index].height ?? ESTIMATE;
    return total;
  }

  // After a scroll: render what is now near the visible part, drop what is far from it.
  fit() {
    const count = this.turns.length;
    if (!count) return;
    const top = this.list.scrollTop;
    const bottom = top + this.list.clientHeight;
    let first = count - 1;
    let last = 0;
    let y = 0;
    for (let index = 0; index < count; index += 1) {
      const turn = this.turns[index];
      let height = turn.height ?? ESTIMATE;
      if (index >= this.start && index < this.end) {
        y = turn.node.offsetTop;
        height = turn.node.offsetHeight;
      } else if (index === this.end) {
        y = this.below.offsetTop;
      }
      if (y + height > top && index < first) first = index;
      if (y < bottom) last = index;
      y += height;
    }
    first = Math.min(first, last);
    const nearStart = this.start > 0 && first < this.start + MARGIN / 2;
    const nearEnd = this.end < count && last >= this.end - MARGIN / 2;
    const tooMany = this.end - this.start > last - first + 1 + 4 * MARGIN;
    if (nearStart || nearEnd || tooMany) this.show(Math.max(0, first - MARGIN), Math.min(count, last + 1 + MARGIN));
  }
}
