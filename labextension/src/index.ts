/**
 * bidlab's JupyterLab extension: a "Learners" sidebar panel listing the learners of the
 * current notebook's kernel, a status-bar item counting running learners over every
 * kernel, and palette commands that pause or stop every learner.
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, ISessionContext } from '@jupyterlab/apputils';
import { IConsoleTracker } from '@jupyterlab/console';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { IFollowed, LearnersPanel } from './panel';
import { LearnersStatus } from './statusbar';
import { LearnerStore } from './store';

const PLUGIN_ID = 'bidlab-labextension:plugin';
const PANEL_ID = 'bidlab-learners';

export namespace CommandIDs {
  export const pauseAll = 'bidlab:pause-all';
  export const stopAll = 'bidlab:stop-all';
  export const showPanel = 'bidlab:show-learners';
}

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <rect x="3" y="13" width="4" height="8" rx="1"/>
    <rect x="10" y="8" width="4" height="13" rx="1"/>
    <rect x="17" y="3" width="4" height="18" rx="1"/>
  </g>
</svg>`;

export const learnersIcon = new LabIcon({ name: 'bidlab:learners', svgstr: ICON_SVG });

/** A widget with a session context: a notebook panel or a console panel. */
interface ISessionWidget extends Widget {
  sessionContext: ISessionContext;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Running bidlab learners: a sidebar panel, a status-bar item, palette commands.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar, ICommandPalette, IConsoleTracker, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    statusBar: IStatusBar | null,
    palette: ICommandPalette | null,
    consoles: IConsoleTracker | null,
    restorer: ILayoutRestorer | null
  ) => {
    const store = new LearnerStore();
    const panel = new LearnersPanel(store);
    panel.id = PANEL_ID;
    panel.title.icon = learnersIcon;
    panel.title.caption = 'bidlab: Learners';
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, PANEL_ID); // reopen the panel after a reload if it was open

    // Follow every kernel a notebook or console is connected to, now and after changes.
    const track = (widget: ISessionWidget): void => {
      const context = widget.sessionContext;
      store.watch(context.session?.kernel);
      context.kernelChanged.connect((_, change) => store.watch(change.newValue));
    };
    notebooks.forEach(track);
    notebooks.widgetAdded.connect((_, widget) => track(widget));
    consoles?.forEach(track);
    consoles?.widgetAdded.connect((_, widget) => track(widget));

    // The panel shows the learners of the notebook (or console) in focus.
    let current: ISessionWidget | null = null;
    const follow = (widget: ISessionWidget | null): void => {
      if (!widget || widget === current) {
        return;
      }
      current = widget;
      const followed: IFollowed = {
        label: widget.title.label,
        sessionContext: widget.sessionContext,
        node: widget.node,
        activate: () => app.shell.activateById(widget.id)
      };
      panel.follow(followed);
      widget.disposed.connect(() => {
        if (current === widget) {
          current = null;
          panel.follow(null);
        }
      });
    };
    notebooks.currentChanged.connect((_, widget) => follow(widget));
    consoles?.currentChanged.connect((_, widget) => follow(widget));
    follow(notebooks.currentWidget);

    // Status bar: hidden while nothing runs.
    if (statusBar) {
      const status = new LearnersStatus(store, () => app.shell.activateById(PANEL_ID));
      const activeChanged = new Signal<LearnersStatus, void>(status);
      let wasActive = status.isActive;
      store.changed.connect(() => {
        if (status.isActive !== wasActive) {
          wasActive = status.isActive;
          activeChanged.emit();
        }
      });
      statusBar.registerStatusItem(PLUGIN_ID, {
        item: status,
        align: 'left',
        rank: 4,
        isActive: () => status.isActive,
        activeStateChanged: activeChanged
      });
    }

    app.commands.addCommand(CommandIDs.pauseAll, {
      label: 'bidlab: pause all learners',
      caption: 'Pause every running bidlab learner in every kernel',
      execute: () => store.commandAll('pause')
    });
    app.commands.addCommand(CommandIDs.stopAll, {
      label: 'bidlab: stop all learners',
      caption: 'Stop every bidlab learner in every kernel',
      execute: () => store.commandAll('stop')
    });
    app.commands.addCommand(CommandIDs.showPanel, {
      label: 'bidlab: show learners',
      execute: () => app.shell.activateById(PANEL_ID)
    });
    if (palette) {
      for (const command of [CommandIDs.pauseAll, CommandIDs.stopAll, CommandIDs.showPanel]) {
        palette.addItem({ command, category: 'bidlab' });
      }
    }
  }
};

export default plugin;
