// The command groups of `billing`, one line each (help lists them by name). To add a group,
// write src/cli/<name>-commands.ts with `export default defineGroup({...})` and add its line.
export { default as migrate } from './migrate-commands';
export { default as communities } from './communities-commands';
export { default as keys } from './keys-commands';
export { default as catalog } from './catalog-commands';
export { default as plans } from './plans-commands';
export { default as sandbox } from './sandbox-commands';
export { default as sqlAccess } from './sql-access-commands';
export { default as operators } from './operators-commands';
export { default as platforms } from './platforms-commands';
export { default as members } from './members-commands';
