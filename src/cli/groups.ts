// The command groups of `billing`, one line each (help lists them by name). To add a group,
// write src/cli/<name>.ts with `export default defineGroup({...})` and add its line.
export { default as migrate } from './migrate';
export { default as communities } from './communities';
export { default as keys } from './keys';
export { default as catalog } from './catalog';
export { default as sandbox } from './sandbox';
