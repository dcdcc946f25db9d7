/** Small DOM helpers shared by the panel and the status-bar item. */

/**
 * Write `text` only when it differs: the store changes a few times a second while learners
 * run, and an unchanged write still replaces the text node and restyles the card.
 */
export function setText(node: HTMLElement, text: string): void {
  if (node.textContent !== text) {
    node.textContent = text;
  }
}

/** Set a property of `node` (title, className, hidden, disabled ...) only when it differs. */
export function setProp<N extends HTMLElement, K extends keyof N>(node: N, key: K, value: N[K]): void {
  if (node[key] !== value) {
    node[key] = value;
  }
}
