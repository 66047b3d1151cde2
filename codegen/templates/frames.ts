/**
 * The fields of each frame the backend sends and of each command, with the kind of value each
 * holds: what `protocol/decode.ts` checks. Each table `satisfies` a type derived from the unions
 * of wire.ts, so a table that misses a field of the schema, or names one it does not have, does
 * not compile.
 */
__IMPORTS__

/** What the decoder checks a value is; `ref` is a snapshot ref (`g2e14`). */
export type FieldKind = "string" | "integer" | "boolean" | "array" | "object" | "ref";

/** The branch of union `U` whose `K` is `T`, without `K`. */
export type Branch<U, K extends keyof U, T> = Omit<Extract<U, Record<K, T>>, K>;
/** The keys of `T` that must be present. */
export type RequiredKeys<T> = {
  [P in keyof T]-?: {} extends Pick<T, P> ? never : P;
}[keyof T];
/** The keys of `T` that may be absent. */
export type OptionalKeys<T> = Exclude<keyof T, RequiredKeys<T>>;

/** Every field of one frame, with its kind: exactly the keys of the frame's type. */
export interface FieldTable<T> {
  readonly required: { readonly [P in RequiredKeys<T>]-?: FieldKind };
  readonly optional: { readonly [P in OptionalKeys<T>]-?: FieldKind };
}

/** One `FieldTable` per branch of union `U`, keyed by its discriminant `K`. */
export type UnionTable<U extends Record<K, string>, K extends keyof U> = {
  readonly [T in U[K]]: FieldTable<Branch<U, K, T>>;
};

/** For each branch of union `U`, a list of some of its fields (hand-kept lists use it). */
export type FieldLists<U extends Record<K, string>, K extends keyof U> = {
  readonly [T in U[K]]: readonly (keyof Branch<U, K, T>)[];
};

/**
 * The fields (`"frame.field"`) that lists `L` leave out: `never` when every field of every branch
 * is listed. `const all: Record<Unlisted<…>, never> = {}` then compiles only when nothing is left
 * out, and the compiler's error names each missing field.
 */
export type Unlisted<U extends Record<K, string>, K extends keyof U, L extends FieldLists<U, K>> = {
  [T in U[K]]: `${T}.${Exclude<keyof Branch<U, K, T>, L[T][number]> & string}`;
}[U[K]];
