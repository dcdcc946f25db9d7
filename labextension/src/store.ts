/**
 * The frontend's view of every kernel's learners.
 *
 * For each kernel connection it sees, the store registers the COMM_TARGET comm target (the
 * kernel opens a comm there when a learner first exists) and asks the kernel, with a
 * comm_info request, whether such a comm is already open (page reload, late attach); if so
 * it adopts that comm by id and asks for a fresh snapshot. Snapshots replace the kernel's
 * learner list; a restart or a dead kernel empties it.
 */

import { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import {
  Action,
  COMM_TARGET,
  ICommandMessage,
  ILearnerInfo,
  IReplyMessage,
  KernelMessage
} from './protocol';

/** How long a command waits for the kernel's reply before it fails. */
const REPLY_TIMEOUT_MS = 10000;

/** Totals over every kernel, for the status bar. */
export interface ITotals {
  running: number;
  samplesPerS: number;
}

interface IPending {
  resolve: (reply: IReplyMessage) => void;
  reject: (error: Error) => void;
  timer: number;
}

/** The learners of one kernel (possibly seen through several connections). */
class KernelChannel {
  constructor(readonly kernelId: string) {}

  learners: ILearnerInfo[] = [];
  readonly connections = new Set<Kernel.IKernelConnection>();
  readonly comms = new Map<Kernel.IKernelConnection, Kernel.IComm>();
  readonly pending = new Map<string, IPending>();

  /** A comm to send commands on, if the kernel has opened one. */
  get comm(): Kernel.IComm | null {
    for (const comm of this.comms.values()) {
      if (!comm.isDisposed) {
        return comm;
      }
    }
    return null;
  }
}

export class LearnerStore implements IDisposable {
  /** Emitted whenever any kernel's learner list changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    for (const channel of this._channels.values()) {
      this._failPending(channel, 'the bidlab panel was disposed');
    }
    this._channels.clear();
    Signal.clearData(this);
  }

  /** The learners of one kernel (empty when none or unknown). */
  learners(kernelId: string | null | undefined): ILearnerInfo[] {
    if (!kernelId) {
      return [];
    }
    return this._channels.get(kernelId)?.learners ?? [];
  }

  /** Running learners and their summed samples/s over every kernel. */
  get totals(): ITotals {
    let running = 0;
    let samplesPerS = 0;
    for (const channel of this._channels.values()) {
      for (const learner of channel.learners) {
        if (learner.state === 'running') {
          running += 1;
          samplesPerS += learner.samples_per_s ?? 0;
        }
      }
    }
    return { running, samplesPerS };
  }

  /** Ids of the kernels that have a bidlab comm open. */
  get kernelIds(): string[] {
    return [...this._channels.values()]
      .filter(channel => channel.comm !== null)
      .map(channel => channel.kernelId);
  }

  /**
   * Start following a kernel connection: register the comm target and adopt a comm the
   * kernel may already have open. Calling it again for the same connection does nothing.
   */
  watch(kernel: Kernel.IKernelConnection | null | undefined): void {
    if (!kernel || this._isDisposed || this._watched.has(kernel) || !kernel.handleComms) {
      return;
    }
    this._watched.add(kernel);
    const channel = this._channel(kernel.id);
    channel.connections.add(kernel);

    kernel.registerCommTarget(COMM_TARGET, (comm, msg) => {
      this._adopt(kernel, comm);
      this._onMessage(channel, msg.content.data as unknown as KernelMessage);
    });
    kernel.statusChanged.connect(this._onStatus, this);
    kernel.connectionStatusChanged.connect((_, status) => {
      if (status === 'connected') {
        void this._probe(kernel);
      }
    }, this);
    kernel.disposed.connect(() => this._forget(kernel), this);
    void this._probe(kernel);
  }

  /**
   * Send a command to a kernel. `learner` null addresses every learner of the kernel.
   * Resolves with the kernel's reply; rejects when no comm is open or nothing answers.
   */
  command(kernelId: string, action: Action, learner: string | null): Promise<IReplyMessage> {
    const channel = this._channels.get(kernelId);
    const comm = channel?.comm;
    if (!channel || !comm) {
      return Promise.reject(
        new Error(`kernel ${kernelId} has no bidlab learners (no bidlab comm is open)`)
      );
    }
    const request = `${Date.now().toString(36)}-${(this._counter++).toString(36)}`;
    const message: ICommandMessage = { action, learner, request };
    return new Promise<IReplyMessage>((resolve, reject) => {
      const timer = window.setTimeout(() => {
        channel.pending.delete(request);
        reject(new Error(`kernel ${kernelId} did not answer "${action}" within 10 s`));
      }, REPLY_TIMEOUT_MS);
      channel.pending.set(request, { resolve, reject, timer });
      try {
        comm.send(message as any);
      } catch (error) {
        window.clearTimeout(timer);
        channel.pending.delete(request);
        reject(error);
      }
    });
  }

  /** Send a command for every learner to every kernel; resolves when all answered. */
  async commandAll(action: Action): Promise<IReplyMessage[]> {
    const replies = await Promise.allSettled(
      this.kernelIds.map(id => this.command(id, action, null))
    );
    const failed = replies.filter(r => r.status === 'rejected');
    if (failed.length) {
      console.warn('bidlab: some kernels did not answer', failed);
    }
    return replies
      .filter((r): r is PromiseFulfilledResult<IReplyMessage> => r.status === 'fulfilled')
      .map(r => r.value);
  }

  private _channel(kernelId: string): KernelChannel {
    let channel = this._channels.get(kernelId);
    if (!channel) {
      channel = new KernelChannel(kernelId);
      this._channels.set(kernelId, channel);
    }
    return channel;
  }

  /** Ask the kernel whether it already has a bidlab comm open; adopt it if so. */
  private async _probe(kernel: Kernel.IKernelConnection): Promise<void> {
    if (kernel.isDisposed || kernel.connectionStatus !== 'connected') {
      return;
    }
    let reply: KM.ICommInfoReplyMsg;
    try {
      reply = await kernel.requestCommInfo({ target_name: COMM_TARGET });
    } catch (error) {
      return; // kernel went away or restarted; the status handler resets the channel
    }
    const content = reply.content;
    if (content.status !== 'ok' || kernel.isDisposed) {
      return;
    }
    for (const [commId, info] of Object.entries(content.comms)) {
      if (info.target_name !== COMM_TARGET || kernel.hasComm(commId)) {
        continue;
      }
      const comm = kernel.createComm(COMM_TARGET, commId);
      this._adopt(kernel, comm);
      const refresh: ICommandMessage = { action: 'refresh', learner: null, request: '' };
      comm.send(refresh as any);
    }
  }

  private _adopt(kernel: Kernel.IKernelConnection, comm: Kernel.IComm): void {
    const channel = this._channel(kernel.id);
    channel.comms.set(kernel, comm);
    comm.onMsg = msg => {
      this._onMessage(channel, msg.content.data as unknown as KernelMessage);
    };
    comm.onClose = () => {
      if (channel.comms.get(kernel) === comm) {
        channel.comms.delete(kernel);
      }
    };
  }

  private _onMessage(channel: KernelChannel, data: KernelMessage | undefined): void {
    if (!data || typeof data !== 'object') {
      return;
    }
    if (data.type === 'reply') {
      const pending = channel.pending.get(data.request);
      if (pending) {
        channel.pending.delete(data.request);
        window.clearTimeout(pending.timer);
        pending.resolve(data);
      }
    }
    if (Array.isArray(data.learners)) {
      channel.learners = data.learners;
      this._changed.emit();
    }
  }

  private _onStatus(kernel: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      const channel = this._channels.get(kernel.id);
      if (channel) {
        // The kernel process is gone, and its learners with it.
        channel.comms.clear();
        this._failPending(channel, `the kernel is ${status}`);
        if (channel.learners.length) {
          channel.learners = [];
          this._changed.emit();
        }
      }
    }
  }

  private _forget(kernel: Kernel.IKernelConnection): void {
    const channel = this._channels.get(kernel.id);
    if (!channel) {
      return;
    }
    channel.connections.delete(kernel);
    channel.comms.delete(kernel);
    if (channel.connections.size === 0) {
      this._failPending(channel, 'the kernel connection was closed');
      this._channels.delete(kernel.id);
      this._changed.emit();
    }
  }

  private _failPending(channel: KernelChannel, why: string): void {
    for (const pending of channel.pending.values()) {
      window.clearTimeout(pending.timer);
      pending.reject(new Error(`bidlab command abandoned: ${why}`));
    }
    channel.pending.clear();
  }

  private _channels = new Map<string, KernelChannel>();
  private _watched = new WeakSet<Kernel.IKernelConnection>();
  private _changed = new Signal<this, void>(this);
  private _counter = 0;
  private _isDisposed = false;
}
