/** The in-process "something was appended" hook that live subscriptions wake up on. */
export class AppendListeners {
  private readonly listeners = new Set<(head: number) => void>();

  add(listener: (head: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(head: number): void {
    for (const l of [...this.listeners]) {
      try {
        l(head);
      } catch {
        // A listener's failure must not break the append that already committed.
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }
}
