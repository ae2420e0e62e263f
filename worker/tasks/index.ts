// graphile-worker tasks, one file each (worker/tasks/<table>__<action>.ts).
// Add one line per task.
import type { TaskList } from 'graphile-worker';

export const taskList: TaskList = {
};
