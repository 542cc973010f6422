import type { BuiltinFeedSource, FeedSource } from '@ctxflow/contracts';
import { normalizeGeneric } from './normalizers/generic.ts';
import { normalizeGithub } from './normalizers/github.ts';
import { normalizeGitlab } from './normalizers/gitlab.ts';
import { normalizeIncidentio } from './normalizers/incidentio.ts';
import { normalizeJira } from './normalizers/jira.ts';
import { normalizeLinear } from './normalizers/linear.ts';
import type { Normalizer } from './normalizers/normalizer.ts';
import { normalizePagerduty } from './normalizers/pagerduty.ts';
import { normalizeServicenow } from './normalizers/servicenow.ts';
import { normalizeZendesk } from './normalizers/zendesk.ts';
import { verifyGeneric } from './verifiers/generic.ts';
import { verifyGithub } from './verifiers/github.ts';
import { verifyGitlab } from './verifiers/gitlab.ts';
import { verifyJira } from './verifiers/jira.ts';
import { verifyLinear } from './verifiers/linear.ts';
import { verifyPagerduty } from './verifiers/pagerduty.ts';
import { verifyStandardWebhooks } from './verifiers/standard-webhooks.ts';
import type { Verifier } from './verifiers/verifier.ts';
import { verifyZendesk } from './verifiers/zendesk.ts';

/** One sender: how its signature is checked and how its payload becomes a TicketUpdate. */
export interface Feed {
  verify: Verifier;
  normalize: Normalizer;
  /**
   * `standard-webhooks`: `verify` is given the Standard Webhooks keys of the
   * secrets (`whsec_` decoded); else the secrets' UTF-8 bytes.
   */
  keys?: 'standard-webhooks';
  /** A delivery with a `webhook-signature` header is verified as Standard Webhooks instead of by `verify`. */
  alsoStandardWebhooks?: boolean;
}

/**
 * Every built-in feed with a body format of its own, by source; the route is
 * `POST /feeds/<source>`, the secret `CTXFLOW_FEED_SECRET_<SOURCE>`. The
 * cloudevents feed has routes of its own (cloudevents-feed.ts).
 */
export const FEEDS: Readonly<Record<Exclude<BuiltinFeedSource, 'cloudevents'>, Feed>> = {
  generic: { verify: verifyGeneric, normalize: normalizeGeneric, alsoStandardWebhooks: true },
  github: { verify: verifyGithub, normalize: normalizeGithub },
  incidentio: { verify: verifyStandardWebhooks, normalize: normalizeIncidentio, keys: 'standard-webhooks' },
  jira: { verify: verifyJira, normalize: normalizeJira },
  servicenow: { verify: verifyStandardWebhooks, normalize: normalizeServicenow, keys: 'standard-webhooks' },
  zendesk: { verify: verifyZendesk, normalize: normalizeZendesk },
  pagerduty: { verify: verifyPagerduty, normalize: normalizePagerduty },
  linear: { verify: verifyLinear, normalize: normalizeLinear },
  gitlab: { verify: verifyGitlab, normalize: normalizeGitlab },
};

/**
 * A configured source (`CTXFLOW_FEED_SECRET_<NAME>`): the generic feed's
 * signature and body under its own name, so its updates are `<name>:<eventId>`
 * of source `<name>`.
 */
export function configuredFeed(source: FeedSource): Feed {
  return {
    verify: verifyGeneric,
    alsoStandardWebhooks: true,
    normalize(delivery) {
      const outcome = normalizeGeneric(delivery);
      if ('update' in outcome) {
        outcome.update.source = source;
        outcome.update.id = `${source}:${outcome.update.eventId}`;
      }
      return outcome;
    },
  };
}

/** The feed of a source that is not cloudevents: a built-in one, else a configured one. */
export function feedOf(source: FeedSource): Feed {
  return Object.hasOwn(FEEDS, source) ? FEEDS[source as keyof typeof FEEDS] : configuredFeed(source);
}
