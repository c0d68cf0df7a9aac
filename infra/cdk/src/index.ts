export { Gannet, FUNCTION_NAMES, FunctionName } from './gannet';
export { FunctionCode } from './code';
export { GannetPropError } from './settings';
export * from './props';
