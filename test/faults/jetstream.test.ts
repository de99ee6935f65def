// Fault suite, JetStream at the quick size: consumers on jetStreamSource SIGKILLed; nats-server restarted under load.
import { describeQuickFaults } from './quickRun.js';

describeQuickFaults('faults: JetStream source', ['jetstream-consumer-sigkill', 'nats-restart']);
