// Small DOM helpers the panels share.

// An element with properties ("testid" sets data-testid, "text" the text content, any
// other key the property of that name) and children (null, undefined and "" are left out).
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "testid") node.setAttribute("data-testid", value);
    else if (key === "text") node.textContent = value;
    else node[key] = value;
  }
  node.append(...children.filter((c) => c !== null && c !== undefined && c !== ""));
  return node;
}

// Requests whose answers draw the same thing: only the newest one's answer may draw it (an
// older answer arriving late must not replace a newer one). `const turn = order.next()`
// before the request is sent, `order.newest(turn)` once its answer is in.
export function requestOrder() {
  let last = 0;
  return { next: () => ++last, newest: (turn) => turn === last };
}

// A panel's message line: the function it returns shows a text there, or hides the line
// when given none.
export function noticeLine(id) {
  return (text) => {
    const line = document.getElementById(id);
    line.textContent = text || "";
    line.hidden = !text;
  };
}
