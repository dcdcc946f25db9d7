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
    const { running, samplesPerS } = this._store.totals;
    setText(this.node, statusText(running, samplesPerS));
  }
}
