/**
 * The "Learners" sidebar panel: one card per learner of the followed kernel (name, model,
 * state, progress, scores, samples/s), with Pause / Resume / Stop buttons and a link to the
 * learner's dashboard in the notebook when one is displayed.
 *
 * Cards are keyed by learner id and updated in place, so a snapshot arriving between the
 * press and the release of a button does not swallow the click.
 */

import { ISessionContext } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { setProp, setText } from './dom';
import { formatProgress, formatRate, formatScore } from './format';
import { Action, ILearnerInfo } from './protocol';
import { LearnerStore } from './store';

/** States a learner can be paused from, resumed from, stopped from. */
const CAN: { [action: string]: string[] } = {
  pause: ['running'],
  resume: ['paused'],
  stop: ['running', 'paused']
};

const BUTTONS: [Action, string][] = [
  ['pause', 'Pause'],
  ['resume', 'Resume'],
  ['stop', 'Stop']
];

/** What the panel follows: a notebook or console, and a way to reveal its dashboards. */
export interface IFollowed {
  label: string;
  sessionContext: ISessionContext;
  /** Root element to search for dashboards in. */
  node: HTMLElement;
  /** Bring the document to the front. */
  activate: () => void;
}

interface ICard {
  root: HTMLElement;
  name: HTMLElement;
  model: HTMLElement;
  state: HTMLElement;
  bar: HTMLElement;
  progress: HTMLElement;
  train: HTMLElement;
  val: HTMLElement;
  rate: HTMLElement;
  buttons: Map<Action, HTMLButtonElement>;
  dashboard: HTMLAnchorElement;
  error: HTMLElement;
  busy: boolean;
  info: ILearnerInfo;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  parent?: HTMLElement,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  parent?.appendChild(node);
  return node;
}

/** Find the element a learner's dashboard carries, inside `root`. */
export function findDashboard(root: HTMLElement | null, info: ILearnerInfo): HTMLElement | null {
  if (!root || !info.dashboard) {
    return null;
  }
  const key = CSS.escape(info.dashboard);
  return root.querySelector<HTMLElement>(`#${key}, .${key}`);
}

export class LearnersPanel extends Widget {
  constructor(private readonly _store: LearnerStore) {
    super();
    this.addClass('jp-bidlab-LearnersPanel');
    const header = el('div', 'jp-bidlab-LearnersPanel-header', this.node);
    el('h2', 'jp-bidlab-LearnersPanel-title', header, 'Learners');
    this._subtitle = el('div', 'jp-bidlab-LearnersPanel-subtitle', header);
    this._list = el('div', 'jp-bidlab-LearnersPanel-list', this.node);
    this._empty = el('div', 'jp-bidlab-LearnersPanel-empty', this.node);
    _store.changed.connect(this.render, this);
    this.render();
  }

  /** Follow another notebook/console (or none). */
  follow(followed: IFollowed | null): void {
    if (this._followed?.sessionContext) {
      this._followed.sessionContext.kernelChanged.disconnect(this.render, this);
    }
    this._followed = followed;
    followed?.sessionContext.kernelChanged.connect(this.render, this);
    this.render();
  }

  get kernelId(): string | null {
    return this._followed?.sessionContext.session?.kernel?.id ?? null;
  }

  /** Bring the cards up to date with the store (while the panel is shown). */
  render(): void {
    if (!this.isVisible) {
      return; // onAfterShow renders when the panel is opened
    }
    const kernelId = this.kernelId;
    const learners = this._store.learners(kernelId);
    setText(
      this._subtitle,
      this._followed ? `${this._followed.label}${kernelId ? '' : ' (no kernel)'}` : 'No notebook'
    );
    setText(
      this._empty,
      learners.length ? '' : 'No bidlab learners in this kernel. Start one with learner.start().'
    );
    setProp(this._empty, 'hidden', learners.length > 0);

    const seen = new Set<string>();
    learners.forEach((info, index) => {
      seen.add(info.id);
      let card = this._cards.get(info.id);
      if (!card) {
        card = this._makeCard(info);
        this._cards.set(info.id, card);
      }
      card.info = info;
      this._fill(card);
      if (this._list.children[index] !== card.root) {
        this._list.insertBefore(card.root, this._list.children[index] ?? null);
      }
    });
    for (const [id, card] of this._cards) {
      if (!seen.has(id)) {
        card.root.remove();
        this._cards.delete(id);
      }
    }
  }

  protected onAfterShow(): void {
    this.render();
  }

  private _makeCard(info: ILearnerInfo): ICard {
    const root = el('div', 'jp-bidlab-Learner');
    root.dataset.learnerId = info.id;
    const head = el('div', 'jp-bidlab-Learner-head', root);
    const name = el('span', 'jp-bidlab-Learner-name', head);
    const state = el('span', 'jp-bidlab-Learner-state', head);
    const sub = el('div', 'jp-bidlab-Learner-sub', root);
    const model = el('span', 'jp-bidlab-Learner-model', sub);
    const track = el('div', 'jp-bidlab-Learner-track', root);
    const bar = el('div', 'jp-bidlab-Learner-bar', track);
    const stats = el('div', 'jp-bidlab-Learner-stats', root);
    const stat = (label: string, cls: string): HTMLElement => {
      const box = el('span', 'jp-bidlab-Learner-stat', stats);
      el('span', 'jp-bidlab-Learner-statLabel', box, label);
      return el('span', `jp-bidlab-Learner-statValue ${cls}`, box);
    };
    const progress = stat('done', 'jp-bidlab-Learner-progress');
    const train = stat('train', 'jp-bidlab-Learner-train');
    const val = stat('valid', 'jp-bidlab-Learner-val');
    const rate = stat('samples/s', 'jp-bidlab-Learner-rate');
    rate.parentElement!.classList.add('jp-bidlab-Learner-stat-wide');
    const actions = el('div', 'jp-bidlab-Learner-actions', root);
    const buttons = new Map<Action, HTMLButtonElement>();
    const card: ICard = {
      root,
      name,
      model,
      state,
      bar,
      progress,
      train,
      val,
      rate,
      buttons,
      dashboard: el('a', 'jp-bidlab-Learner-dashboard'),
      error: el('div', 'jp-bidlab-Learner-error'),
      busy: false,
      info
    };
    for (const [action, label] of BUTTONS) {
      const button = el(
        'button',
        `jp-bidlab-Button jp-bidlab-Learner-${action}`,
        actions,
        label
      );
      button.dataset.action = action;
      button.addEventListener('click', () => void this._act(card, action));
      buttons.set(action, button);
    }
    card.dashboard.textContent = 'dashboard ↓';
    card.dashboard.href = '#';
    card.dashboard.title = "Scroll to this learner's dashboard";
    card.dashboard.addEventListener('click', event => {
      event.preventDefault();
      this._reveal(card.info);
    });
    sub.appendChild(card.dashboard);
    root.appendChild(card.error);
    return card;
  }

  private _fill(card: ICard): void {
    const info = card.info;
    if (card.root.dataset.state !== info.state) {
      card.root.dataset.state = info.state;
    }
    setText(card.name, info.name);
    setProp(card.name, 'title', info.name);
    setText(card.model, info.model);
    setText(card.state, info.state);
    setProp(card.state, 'className', `jp-bidlab-Learner-state jp-bidlab-state-${info.state}`);
    const fraction = info.progress ?? 0;
    const width = `${Math.round(Math.min(Math.max(fraction, 0), 1) * 1000) / 10}%`;
    if (card.bar.style.width !== width) {
      card.bar.style.width = width;
    }
    setText(card.progress, formatProgress(info.progress) || '–');
    setText(card.train, formatScore(info.train_score));
    setProp(card.train, 'title', String(info.train_score ?? ''));
    setText(card.val, formatScore(info.val_score));
    setProp(card.val, 'title', String(info.val_score ?? ''));
    setText(card.rate, formatRate(info.samples_per_s));
    for (const [action, button] of card.buttons) {
      setProp(button, 'disabled', card.busy || !CAN[action].includes(info.state));
    }
    const dashboard = findDashboard(this._followed?.node ?? null, info);
    setProp(card.dashboard, 'hidden', dashboard === null);
  }

  private async _act(card: ICard, action: Action): Promise<void> {
    const kernelId = this.kernelId;
    if (!kernelId || card.busy) {
      return;
    }
    card.busy = true;
    card.error.textContent = '';
    this._fill(card);
    try {
      const reply = await this._store.command(kernelId, action, card.info.id);
      if (!reply.ok) {
        card.error.textContent = reply.error ?? `${action} failed`;
      }
    } catch (error) {
      card.error.textContent = String((error as Error).message ?? error);
    } finally {
      card.busy = false;
      this._fill(card);
    }
  }

  private _reveal(info: ILearnerInfo): void {
    const followed = this._followed;
    const target = findDashboard(followed?.node ?? null, info);
    if (!followed || !target) {
      return;
    }
    followed.activate();
    target.scrollIntoView({ behavior: 'smooth', block: 'center' });
    target.classList.add('jp-bidlab-flash');
    window.setTimeout(() => target.classList.remove('jp-bidlab-flash'), 1200);
  }

  private _followed: IFollowed | null = null;
  private _cards = new Map<string, ICard>();
  private _list: HTMLElement;
  private _empty: HTMLElement;
  private _subtitle: HTMLElement;
}
