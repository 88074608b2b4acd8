// What a view is given: where to draw, the route's parameters, and how to report a failed call.

import type { Conversation } from "../../clients/typescript/src/gen/ctxd/v1/conversations_pb.js";

/** The context of one rendering of a view. */
export interface ViewContext {
  /** The conversation the view shows ("" on the conversation list). */
  id: string;
  /** The route's query parameters (e.g. `seq`). */
  params: URLSearchParams;
  /** The element the view draws into (emptied before the view runs). */
  root: HTMLElement;
  /** False once the person has gone to another route: late answers are dropped. */
  live(): boolean;
  /** Shows a failed call in the banner (and the key prompt when the key stopped working). */
  fail(err: unknown): void;
  /** The conversation, read with GetConversation when the view opened (undefined on the list). */
  conversation?: Conversation;
}

/** A view: draws into `ctx.root`. */
export type View = (ctx: ViewContext) => Promise<void>;
