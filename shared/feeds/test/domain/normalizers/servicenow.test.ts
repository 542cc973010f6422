/**
 * ServiceNow records through `POST /feeds/servicenow`, signed by the
 * `standardwebhooks` package. Fixtures: `servicenow-table-api-problem.json` is
 * the record of the example response of ServiceNow's Table API reference
 * (REST API reference, "Table API", GET /now/table/{tableName}: PRB0000050),
 * as published; `servicenow-incident-commented.json` is the sample-data
 * incident INC0000001 ("Can't read email") in the shape the Business Rule of
 * docs/servicenow.md sends (state and priority as `sysparm_display_value=all`
 * gives them, the comment and work note added in the update as their journal
 * entries).
 */
import { TOPICS } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import { servicenowTime } from '../../../src/domain/normalizers/servicenow.ts';
import { feedApp, fixture, RECEIVED_AT, SECRETS, standardHeaders } from '../../helpers.ts';

type App = Awaited<ReturnType<typeof feedApp>>['app'];
const post = (app: App, body: Buffer | string, id: string) =>
  app.inject({
    method: 'POST',
    url: '/feeds/servicenow',
    headers: standardHeaders(body, id, SECRETS.servicenow),
    payload: body,
  });
const COMMENT =
  "2024-05-01 09:29:40 - Beth Anglin (Additional comments)\nWe are restoring the mail server from last night's backup.";
const NOTE = '2024-05-01 09:29:40 - Beth Anglin (Work notes)\nExchange store EDB-2 is corrupt; restore started 09:25.';

describe('ServiceNow feed', () => {
  it("the Table API reference's example record -> one TicketUpdate of its number, version sys_mod_count", async () => {
    const { app, publisher } = await feedApp();
    const id = '04ce72c9c0a8016600b5b7f75ac67b5b.1';
    const res = await post(app, fixture('servicenow-table-api-problem.json'), id);
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ accepted: true, id: `servicenow:${id}` });
    const [{ topic, record }] = publisher.published as [(typeof publisher.published)[number]];
    expect(topic).toBe(TOPICS.ticketUpdates);
    expect(record.key).toBe('servicenow:PRB0000050');
    expect(JSON.parse(record.value)).toEqual({
      id: `servicenow:${id}`,
      tenant: 'default',
      source: 'servicenow',
      ticket: 'PRB0000050',
      scope: 'problem',
      eventId: id,
      kind: 'updated',
      summary: 'PRB0000050 updated: Switch occasionally drops connections (state 4, priority 4)',
      title: 'Switch occasionally drops connections',
      author: 'glide.maint',
      version: 1,
      occurredAt: '2016-01-19T04:52:04Z',
      receivedAt: RECEIVED_AT,
    });
    await app.close();
  });

  it('an update carrying a comment and a work note -> both as changes, display values in the text', async () => {
    const { app, publisher } = await feedApp();
    const id = '9d385017c611228701d22104cc95c371.7';
    expect((await post(app, fixture('servicenow-incident-commented.json'), id)).statusCode).toBe(202);
    expect(JSON.parse(publisher.published[0]!.record.value)).toEqual({
      id: `servicenow:${id}`,
      tenant: 'default',
      source: 'servicenow',
      ticket: 'INC0000001',
      scope: 'incident',
      eventId: id,
      kind: 'commented',
      summary: `INC0000001 updated: Can't read email (state In Progress, priority 1 - Critical)\nComment: ${COMMENT}\nWork note: ${NOTE}`,
      title: "Can't read email",
      author: 'beth.anglin',
      version: 7,
      occurredAt: '2024-05-01T09:29:40Z',
      changes: [
        { field: 'comments', from: null, to: COMMENT },
        { field: 'work_notes', from: null, to: NOTE },
      ],
      receivedAt: RECEIVED_AT,
    });
    await app.close();
  });

  it('the insert (sys_mod_count 0) is created; a work note alone is work_note; a numeric sys_mod_count is read too', async () => {
    const { app, publisher } = await feedApp();
    const incident = JSON.parse(fixture('servicenow-incident-commented.json').toString());
    await post(app, JSON.stringify({ ...incident, sys_mod_count: '0', comments: '', work_notes: '' }), 'ins.0');
    await post(app, JSON.stringify({ ...incident, sys_mod_count: 8, comments: '' }), 'upd.8');
    const [created, noted] = publisher.published.map((p) => JSON.parse(p.record.value));
    expect(created).toMatchObject({
      kind: 'created',
      version: 0,
      summary: "INC0000001 created: Can't read email (state In Progress, priority 1 - Critical)",
    });
    expect(created.changes).toBeUndefined();
    expect(noted).toMatchObject({
      kind: 'work_note',
      version: 8,
      changes: [{ field: 'work_notes', from: null, to: NOTE }],
    });
    await app.close();
  });

  it('a redelivery (same webhook-id) -> 202 duplicate, published once', async () => {
    const { app, publisher } = await feedApp();
    const body = fixture('servicenow-incident-commented.json');
    expect((await post(app, body, 'rec.7')).json()).toEqual({ accepted: true, id: 'servicenow:rec.7' });
    expect((await post(app, body, 'rec.7')).json()).toEqual({
      accepted: true,
      id: 'servicenow:rec.7',
      duplicate: true,
    });
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it('a record without a number names no ticket -> 202 ignored, nothing published', async () => {
    const { app, publisher } = await feedApp();
    const user = JSON.stringify({
      sys_id: '62826bf03710200044e0bfc8bcbe5df1',
      user_name: 'abel.tuter',
      sys_mod_count: '3',
    });
    const res = await post(app, user, 'user.3');
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ ignored: true });
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('a body that is not a Table API record -> 400 naming the field, nothing published', async () => {
    const { app, publisher } = await feedApp();
    for (const [body, message] of [
      ['[]', 'servicenow record: body: Invalid input: expected object, received array'],
      ['{"number":"INC1","sys_mod_count":"1"}', 'servicenow record: sys_id: Invalid input'],
      [
        '{"sys_id":"a","number":"INC1","sys_mod_count":"one"}',
        'servicenow record: sys_mod_count: expected a non-negative integer',
      ],
    ] as const) {
      const res = await post(app, body, 'bad.1');
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'validation_error', message });
    }
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('sys_updated_on reads as UTC; anything else is not a time', () => {
    expect(servicenowTime('2024-05-01 09:29:40')).toBe('2024-05-01T09:29:40Z');
    expect(servicenowTime('2024-13-01 09:29:40')).toBeUndefined();
    expect(servicenowTime('05/01/2024 09:29')).toBeUndefined();
  });
});
