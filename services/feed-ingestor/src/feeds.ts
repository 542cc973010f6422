import type { FeedSource } from '@ctxflow/contracts';
import { normalizeGeneric } from './normalizers/generic.ts';
import { normalizeGithub } from './normalizers/github.ts';
import { normalizeJira } from './normalizers/jira.ts';
import type { Normalizer } from './normalizers/normalizer.ts';
import { normalizeZendesk } from './normalizers/zendesk.ts';
import { verifyGeneric } from './verifiers/generic.ts';
import { verifyGithub } from './verifiers/github.ts';
import { verifyJira } from './verifiers/jira.ts';
import type { Verifier } from './verifiers/verifier.ts';
import { verifyZendesk } from './verifiers/zendesk.ts';

/** One sender: how its signature is checked and how its payload becomes a TicketUpdate. */
export interface Feed {
  verify: Verifier;
  normalize: Normalizer;
}

/** Every feed, by source; the route is `POST /feeds/<source>`, the secret `CTXFLOW_FEED_SECRET_<SOURCE>`. */
export const FEEDS: Readonly<Record<FeedSource, Feed>> = {
  generic: { verify: verifyGeneric, normalize: normalizeGeneric },
  github: { verify: verifyGithub, normalize: normalizeGithub },
  jira: { verify: verifyJira, normalize: normalizeJira },
  zendesk: { verify: verifyZendesk, normalize: normalizeZendesk },
};
