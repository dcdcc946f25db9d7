/**
 * The wire format between the bidlab kernel bridge (bidlab/lab/bridge.py) and this
 * extension. The kernel opens a comm on COMM_TARGET and sends snapshots; the extension
 * sends commands on the same comm and the kernel answers each with a reply.
 */

/** The comm target the kernel opens (and the frontend registers on every kernel). */
export const COMM_TARGET = 'bidlab.learners';

/** Learner states as the kernel reports them. */
export type LearnerState =
  | 'created'
  | 'running'
  | 'paused'
  | 'stopped'
  | 'failed'
  | 'done';

/** One learner as the kernel describes it in a snapshot. */
export interface ILearnerInfo {
  /** Stable id of the live learner object inside its kernel. */
  id: string;
  name: string;
  /** Class name of the learner's model, e.g. "LDA". */
  model: string;
  state: LearnerState | string;
  /** Fraction of the planned work done, 0..1; null when unknown. */
  progress: number | null;
  train_score: number | null;
  val_score: number | null;
  samples_per_s: number | null;
  /** DOM class the learner's dashboard (if displayed) carries. */
  dashboard: string;
}

/** Kernel -> frontend: the current learners of the kernel. */
export interface ISnapshotMessage {
  type: 'snapshot';
  learners: ILearnerInfo[];
}

/** Kernel -> frontend: the answer to one command. */
export interface IReplyMessage {
  type: 'reply';
  request: string;
  action: Action;
  /** The learner the command addressed; null for "every learner". */
  learner: string | null;
  ok: boolean;
  /** New state of each learner the command acted on, by id. */
  states: { [id: string]: string };
  error: string | null;
  /** The snapshot right after the command ran. */
  learners: ILearnerInfo[];
}

export type KernelMessage = ISnapshotMessage | IReplyMessage;

/** Frontend -> kernel commands. "refresh" asks for a snapshot. */
export type Action = 'pause' | 'resume' | 'stop' | 'refresh';

export interface ICommandMessage {
  action: Action;
  learner: string | null;
  request: string;
}
