/**
 * The status-bar item "bidlab: 2 running · 1.3 M samples/s": totals over every kernel the
 * frontend knows; hidden (inactive) when no learner runs. Clicking it opens the panel.
 */

import { Widget } from '@lumino/widgets';

import { setText } from './dom';
import { formatRate } from './format';
import { LearnerStore } from './store';

/** The text of the item for `running` learners doing `samplesPerS` in total. */
export function statusText(running: number, samplesPerS: number): string {
  return `bidlab: ${running} running · ${formatRate(samplesPerS)} samples/s`;
}

/**
 * The item rewrites its text at most this often. The store changes 4 times a second per
 * running learner, and on a small machine every text change in the page costs the browser a
 * style, layout and paint pass beside the training kernel (one line of text changing 10
 * times a second measured ~0.08 of a core of chromium's renderer on a 2-core machine).
 */
export const STATUS_INTERVAL_MS = 1000;

export class LearnersStatus extends Widget {
  constructor(
    private readonly _store: LearnerStore,
    onClick: () => void
  ) {
    super();
    this.addClass('jp-bidlab-StatusItem');
    this.node.title = 'bidlab learners: click to open the Learners panel';
    this.node.addEventListener('click', onClick);
    _store.changed.connect(this.update, this);
    this.update();
  }

  /** Whether any learner runs (the status bar hides the item otherwise). */
  get isActive(): boolean {
    return this._store.totals.running > 0;
  }

  protected onUpdateRequest(): void {
    const wait = this._written + STATUS_INTERVAL_MS - Date.now();
    if (wait > 0) {
      // too soon: write the latest totals once the interval is over
      this._timer ||= window.setTimeout(() => {
        this._timer = 0;
        this.update();
      }, wait);
      return;
    }
    this._written = Date.now();
    const { running, samplesPerS } = this._store.totals;
    setText(this.node, statusText(running, samplesPerS));
  }

  dispose(): void {
    window.clearTimeout(this._timer);
    super.dispose();
  }

  private _written = 0;
  private _timer = 0;
}
