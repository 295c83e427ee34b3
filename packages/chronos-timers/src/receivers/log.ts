/**
 * The receiver used when no router is configured: each wake is written to the log and counts as
 * delivered, so a newcomer's first alarm visibly fires without any other service running.
 */
import type { Logger } from '../logger.js';
import type { Delivery, Fire, Receiver } from './receiver.js';

export class LogReceiver implements Receiver {
  readonly name = 'log';

  constructor(private readonly logger: Logger) {}

  async deliver(fire: Fire): Promise<Delivery> {
    this.logger.info(
      {
        wakeId: fire.wakeId,
        alarmId: fire.alarm.id,
        label: fire.alarm.label,
        scheduledFor: fire.scheduledFor.toISOString(),
        firedAt: fire.firedAt.toISOString(),
        latenessMs: fire.latenessMs,
        attempt: fire.attempt,
        wakeMessage: fire.alarm.wakeMessage,
      },
      'alarm fired (no CHRONOS_ROUTER_URL: logged instead of delivered)',
    );
    return { ok: true };
  }
}
